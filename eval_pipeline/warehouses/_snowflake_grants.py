"""What a Snowflake role may do, read from `SHOW GRANTS TO ROLE` rows: read-only, or what it holds beyond reading.

A session has the privileges of its primary role, of every role that role inherits (grants of
`USAGE` on a role or a database role), of PUBLIC (which every role inherits) and of its
active secondary roles. Only reading privileges may be among them; anything else (OWNERSHIP,
any CREATE, INSERT/UPDATE/DELETE/TRUNCATE, a grant option, an account-level privilege, the
system administration roles) counts as held, so the connection is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "ADMIN_ROLES",
    "Grant",
    "grants_held",
    "secondary_roles",
    "snowflake_read_only_recipe",
]

#: The system roles that administer the account: a session with one of them is refused
#: whatever its grants say (their power is partly implicit).
ADMIN_ROLES = frozenset({"ACCOUNTADMIN", "ORGADMIN", "SECURITYADMIN", "SYSADMIN", "USERADMIN"})
#: Objects a role reads rows of: SELECT and REFERENCES on them only read.
_TABLES = frozenset(
    {
        "TABLE",
        "VIEW",
        "MATERIALIZED_VIEW",
        "EXTERNAL_TABLE",
        "DYNAMIC_TABLE",
        "EVENT_TABLE",
        "ICEBERG_TABLE",
        "HYBRID_TABLE",
        "STREAM",
    }
)
#: (privilege, object kind) pairs that only read or only let a session reach what it reads:
#: every other grant counts as held.
_READING = frozenset(
    {("SELECT", kind) for kind in _TABLES}
    | {("REFERENCES", kind) for kind in _TABLES}
    | {("USAGE", "DATABASE"), ("USAGE", "SCHEMA"), ("USAGE", "WAREHOUSE")}
    | {("MONITOR", "WAREHOUSE"), ("MONITOR", "DATABASE"), ("MONITOR", "SCHEMA")}
)
#: Grants of a role to a role: its privileges are inherited (read next).
_ROLE_KINDS = {"ROLE": "ROLE", "DATABASE_ROLE": "DATABASE ROLE"}


@dataclass(frozen=True)
class Grant:
    """One row of `SHOW GRANTS TO ROLE`: `privilege` on `granted_on` `name`."""

    privilege: str
    granted_on: str
    name: str
    grant_option: bool = False

    @classmethod
    def from_row(cls, row: dict[str, object]) -> Grant:
        """A grant from a row keyed by Snowflake's column names (any case)."""
        lower = {str(key).lower(): value for key, value in row.items()}
        option = str(lower.get("grant_option", "false")).strip().lower() == "true"
        return cls(
            str(lower["privilege"]).upper(),
            str(lower["granted_on"]).upper().replace(" ", "_"),
            str(lower["name"]),
            option,
        )


def grants_held(roles: Iterable[str], grants_of: Callable[[str, str], list[Grant]]) -> list[str]:
    """What the `roles` (the primary role, the active secondary roles) and every role they
    inherit, PUBLIC included, hold beyond reading, one line per finding.

    `grants_of(kind, name)` gives the grants to a role (`kind` "ROLE" or "DATABASE ROLE"),
    as `SHOW GRANTS TO <kind> <name>` lists them.
    """
    held: list[str] = []
    seen: set[tuple[str, str]] = set()
    pending = [("ROLE", role, role) for role in [*roles, "PUBLIC"] if role]
    while pending:
        kind, role, top = pending.pop(0)
        key = (kind, role.upper())
        if key in seen:
            continue
        seen.add(key)
        via = "" if role.upper() == top.upper() else f" (through role {top})"
        if kind == "ROLE" and role.upper() in ADMIN_ROLES:
            held.append(f"the system role {role.upper()}{via}")
            continue
        for grant in grants_of(kind, role):
            inherited = _ROLE_KINDS.get(grant.granted_on)
            if inherited and grant.privilege == "USAGE":
                pending.append((inherited, _unquoted(grant.name), top))
                if grant.grant_option:
                    held.append(f"USAGE on {grant.granted_on} {grant.name} WITH GRANT OPTION{via}")
                continue
            if (grant.privilege, grant.granted_on) not in _READING:
                held.append(f"{grant.privilege} on {grant.granted_on} {grant.name}{via}")
            elif grant.grant_option:
                held.append(
                    f"{grant.privilege} on {grant.granted_on} {grant.name} WITH GRANT OPTION{via}"
                )
    return list(dict.fromkeys(held))


def secondary_roles(current_secondary_roles: str | None) -> list[str]:
    """The active secondary roles from `CURRENT_SECONDARY_ROLES()`'s JSON
    (`{"roles": "R1,R2", "value": "ALL"}`); none when there are none."""
    if not current_secondary_roles:
        return []
    try:
        value = json.loads(current_secondary_roles)
    except ValueError:
        return []
    roles = value.get("roles", "") if isinstance(value, dict) else ""
    return [role.strip() for role in str(roles).split(",") if role.strip()]


def snowflake_read_only_recipe(
    user: str, database: str, schema: str | None, warehouse: str | None
) -> str:
    """The statements, on one line, that create a read-only Snowflake role for `database`'s
    `schema` on `warehouse` and make it `user`'s only role."""
    scope = f"{database}.{schema}" if schema else f"{database}.<schema>"
    return (
        "CREATE ROLE eval_reader; "
        f"GRANT USAGE ON WAREHOUSE {warehouse or '<warehouse>'} TO ROLE eval_reader; "
        f"GRANT USAGE ON DATABASE {database} TO ROLE eval_reader; "
        f"GRANT USAGE ON SCHEMA {scope} TO ROLE eval_reader; "
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {scope} TO ROLE eval_reader; "
        f"GRANT SELECT ON ALL VIEWS IN SCHEMA {scope} TO ROLE eval_reader; "
        f"GRANT ROLE eval_reader TO USER {user}; "
        f"ALTER USER {user} SET DEFAULT_ROLE = eval_reader DEFAULT_SECONDARY_ROLES = (); "
        "and connect with role=eval_reader"
    )


def _unquoted(name: str) -> str:
    """A role's name as SHOW GRANTS prints it, without the quotes of a quoted name."""
    return name[1:-1].replace('""', '"') if name.startswith('"') and name.endswith('"') else name

"""What the connecting role may do on the server, checked before its first statement: read-only, or refused.

The server's own privileges are the first defence of the agent's SQL: a role that can only
read cannot write, read the server's files or end other sessions, whatever a statement
manages to say. So a role holding more than reading is refused with one line naming what it
holds and the few statements that create a read-only role (docs/warehouses.md), unless the
database opts out with `allow_privileged_role: true` (then a warning is logged on every
connection's first use per process).
"""

from __future__ import annotations

import logging

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._errors import ConnectionFailed

__all__ = [
    "MYSQL_READ_PRIVILEGES",
    "POSTGRES_PRIVILEGES_SQL",
    "PrivilegedRole",
    "judge_privileges",
    "mysql_grants_held",
    "privileged_role_warning",
    "read_only_recipe",
]

log = logging.getLogger("eval_pipeline.warehouses")

#: One row of what the current role holds beyond reading, each column a thing held (NULL: not
#: held). The predefined roles are checked by membership (`pg_has_role ... MEMBER`), writes
#: and CREATE/TEMP through the server's own `has_*_privilege` functions, so ownership and
#: PUBLIC grants count.
POSTGRES_PRIVILEGES_SQL = """
SELECT
  CASE WHEN r.rolsuper THEN 'superuser' END,
  CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END,
  CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
  CASE WHEN r.rolreplication THEN 'REPLICATION' END,
  (SELECT string_agg('member of ' || g, ', ' ORDER BY g)
     FROM unnest(ARRAY['pg_read_server_files', 'pg_write_server_files',
                       'pg_execute_server_program', 'pg_signal_backend',
                       'pg_write_all_data']) AS g
    WHERE pg_has_role(current_user, g, 'MEMBER')),
  CASE WHEN has_database_privilege(current_database(), 'CREATE')
       THEN 'CREATE on database ' || current_database() END,
  CASE WHEN has_database_privilege(current_database(), 'TEMPORARY')
       THEN 'TEMPORARY on database ' || current_database() END,
  (SELECT 'CREATE on schema ' || min(n.nspname) FROM pg_namespace n
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\\_%' AND has_schema_privilege(n.oid, 'CREATE')),
  (SELECT 'INSERT/UPDATE/DELETE/TRUNCATE on ' || min(n.nspname || '.' || c.relname)
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\\_%'
      AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
FROM pg_roles r WHERE r.rolname = current_user
"""

#: What a MySQL/MariaDB account may hold and still be read-only (`SHOW GRANTS` words).
MYSQL_READ_PRIVILEGES = frozenset({"USAGE", "SELECT", "SHOW VIEW", "SHOW DATABASES"})


class PrivilegedRole(ConnectionFailed):
    """The role can do more than read; the message names what and how to make a read-only one."""


def judge_privileges(database: DatabaseConfig, label: str, held: list[str], recipe: str) -> None:
    """Refuse the connection when `held` (what the role holds beyond reading) is not empty,
    unless `database.allow_privileged_role`: then log a warning, once per process.

    Raises:
        PrivilegedRole: with what is held and the read-only role's statements.
    """
    if not held:
        return
    what = "; ".join(held)
    if not database.allow_privileged_role:
        raise PrivilegedRole(
            f"{label}: the role can do more than read ({what}), so the agent's SQL could too; "
            f"connect as a read-only role, e.g. {recipe} (or set allow_privileged_role: true "
            "on this database to accept the risk)"
        )
    if database.name not in _warned:
        _warned.add(database.name)
        log.warning(
            "%s: allow_privileged_role is set and the role holds %s: the agent's SQL runs "
            "with those privileges",
            label,
            what,
        )


_warned: set[str] = set()


def privileged_role_warning(database: DatabaseConfig) -> str:
    """The line `eval-pipeline test` prints for a database that opted out of the check."""
    return (
        f"warning: database {database.name!r} has allow_privileged_role: true; the agent's "
        "SQL runs with every privilege of its role (docs/warehouses.md)"
    )


def read_only_recipe(kind: str, dbname: str, schema: str | None) -> str:
    """The statements, on one line, that create a read-only role for `dbname` (and `schema`)."""
    if kind == "postgres":
        schema = schema or "public"
        return (
            "CREATE ROLE eval_reader LOGIN PASSWORD '…'; "
            f"GRANT CONNECT ON DATABASE {dbname} TO eval_reader; "
            f"GRANT USAGE ON SCHEMA {schema} TO eval_reader; "
            f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO eval_reader; "
            f"REVOKE TEMPORARY ON DATABASE {dbname} FROM PUBLIC;"
        )
    return (
        "CREATE USER 'eval_reader'@'%' IDENTIFIED BY '…'; "
        f"GRANT SELECT, SHOW VIEW ON {dbname or '<database>'}.* TO 'eval_reader'@'%';"
    )


def mysql_grants_held(grants: list[str]) -> tuple[list[str], list[str]]:
    """What `SHOW GRANTS` lines give beyond reading, and the roles they grant (to read next).

    A line is `GRANT <privileges> ON <what> TO <account> [WITH GRANT OPTION]`, or
    `GRANT <role> TO <account>` for a role; `PROXY` and `WITH GRANT OPTION` count as held.
    """
    held: list[str] = []
    roles: list[str] = []
    for line in grants:
        text = line.strip()
        if not text.upper().startswith("GRANT "):
            continue  # SET DEFAULT ROLE ...
        body = text[6:]
        upper = body.upper()
        if " ON " not in upper:
            roles.append(body[: upper.rfind(" TO ")].strip())
            continue
        on = upper.index(" ON ")
        target = body[on + 4 : upper.index(" TO ", on)].strip()
        for privilege in (p.strip().upper() for p in body[:on].split(",")):
            name = privilege.split("(", 1)[0].strip()  # SELECT (col) on columns
            if name not in MYSQL_READ_PRIVILEGES:
                held.append(f"{name} ON {target}")
        if "WITH GRANT OPTION" in upper:
            held.append(f"GRANT OPTION ON {target}")
    return held, roles

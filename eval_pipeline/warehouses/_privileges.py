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
    "POSTGRES_READING_ROLES",
    "PrivilegedRole",
    "judge_privileges",
    "mysql_grants_held",
    "mysql_read_only_recipe",
    "postgres_privileges_sql",
    "postgres_read_only_recipe",
    "privileged_role_warning",
]

log = logging.getLogger("eval_pipeline.warehouses")

#: PostgreSQL's predefined roles that only read (statistics, settings, every table): a role
#: may be, or become, one of them. Every other role built in with the server
#: (`pg_write_server_files`, `pg_signal_backend`, `pg_checkpoint`, `pg_database_owner`...,
#: and any a later version adds) counts as held.
POSTGRES_READING_ROLES = frozenset(
    {
        "pg_monitor",
        "pg_read_all_data",
        "pg_read_all_settings",
        "pg_read_all_stats",
        "pg_stat_scan_tables",
    }
)


def postgres_privileges_sql(server_version_num: int) -> str:
    """One row, one array: what the current role holds beyond reading, one line per kind
    (its first example and how many more), or only that it is or can become a superuser.

    Whatever a role the session can become holds counts: `SET ROLE` reaches every role it is
    a member of through any chain of grants, NOINHERIT or not (`pg_has_role ... MEMBER`).
    The privileges are asked of the server's own functions (`has_table_privilege`,
    `has_any_column_privilege`, `has_sequence_privilege`...), so ownership and PUBLIC's grants
    count; ownership of anything (a table, a schema, a function, a large object, the
    database) is read where the server records it for `DROP OWNED` (`pg_shdepend`).
    """
    parameters = _POSTGRES_PARAMETERS if server_version_num >= 150000 else ""
    return _POSTGRES_PRIVILEGES.replace("{parameters}", parameters).replace(
        "{reading}", ", ".join(f"'{name}'" for name in sorted(POSTGRES_READING_ROLES))
    )


_POSTGRES_PRIVILEGES = """
WITH roles AS (
  SELECT r.oid, r.rolname, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
         r.rolbypassrls, r.oid < 16384 AND r.rolname IN ({reading}) AS reading,
         CASE WHEN r.rolname = current_user THEN ''
              ELSE ' (by SET ROLE ' || quote_ident(r.rolname) || ')' END AS via
    FROM pg_roles r WHERE pg_has_role(current_user, r.oid, 'MEMBER')
),
relations AS (
  SELECT c.oid, c.relkind, quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
     AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
),
findings (ord, kind, what) AS (
  SELECT 1, a.what, a.what || r.via FROM roles r CROSS JOIN LATERAL (VALUES
      ('superuser', r.rolsuper), ('CREATEROLE', r.rolcreaterole), ('CREATEDB', r.rolcreatedb),
      ('REPLICATION', r.rolreplication), ('BYPASSRLS', r.rolbypassrls)) AS a (what, held)
   WHERE a.held
  UNION ALL
  SELECT 2, 'member', 'member of ' || r.rolname FROM roles r
   WHERE r.oid < 16384 AND NOT r.rolsuper AND NOT r.reading
  UNION ALL
  SELECT 3, 'admin', 'ADMIN OPTION on role ' || m.roleid::regrole::text || r.via
    FROM pg_auth_members m JOIN roles r ON r.oid = m.member WHERE m.admin_option
  UNION ALL
  SELECT 4, 'owns', 'owns ' || pg_describe_object(d.classid, d.objid, d.objsubid) || r.via
    FROM pg_shdepend d JOIN roles r ON r.oid = d.refobjid
   WHERE d.refclassid = 'pg_authid'::regclass AND d.deptype = 'o'
     AND d.dbid IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
  UNION ALL
  SELECT 5, p, p || ' on database ' || quote_ident(current_database()) || r.via
    FROM roles r, unnest(ARRAY['CREATE', 'TEMPORARY']) AS p
   WHERE has_database_privilege(r.oid, current_database(), p)
  UNION ALL
  SELECT 6, p, p || ' on schema ' || quote_ident(n.nspname) || r.via
    FROM pg_namespace n, roles r, unnest(ARRAY['CREATE', 'USAGE WITH GRANT OPTION']) AS p
   WHERE has_schema_privilege(r.oid, n.oid, p)
  UNION ALL
  SELECT 7, p, p || CASE WHEN has_table_privilege(r.oid, t.oid, p) THEN ' on '
                         ELSE ' on columns of ' END || t.name || r.via
    FROM relations t, roles r,
         unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER',
                      'SELECT WITH GRANT OPTION']) AS p
   WHERE t.relkind <> 'S' AND CASE WHEN p IN ('INSERT', 'UPDATE', 'REFERENCES')
                                   THEN has_any_column_privilege(r.oid, t.oid, p)
                                   ELSE has_table_privilege(r.oid, t.oid, p) END
  UNION ALL
  SELECT 8, p, p || ' on sequence ' || t.name || r.via
    FROM relations t, roles r, unnest(ARRAY['USAGE', 'UPDATE', 'SELECT WITH GRANT OPTION']) AS p
   WHERE t.relkind = 'S' AND has_sequence_privilege(r.oid, t.oid, p)
  UNION ALL
  SELECT 9, 'UPDATE large object', 'UPDATE on large object ' || l.oid
         || coalesce(r.via, ' (granted to PUBLIC)')
    FROM pg_largeobject_metadata l CROSS JOIN LATERAL aclexplode(l.lomacl) AS a
         LEFT JOIN roles r ON r.oid = a.grantee
   WHERE a.privilege_type = 'UPDATE' AND (a.grantee = 0 OR r.oid IS NOT NULL)
  UNION ALL
  SELECT 9, 'lo_compat_privileges', 'UPDATE on every large object (lo_compat_privileges is on)'
   WHERE current_setting('lo_compat_privileges') = 'on'
  UNION ALL
  SELECT 10, 'EXECUTE', 'EXECUTE on ' || p.oid::regprocedure::text || r.via
    FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) AS a JOIN roles r ON r.oid = a.grantee
   WHERE p.provolatile = 'v' AND a.privilege_type = 'EXECUTE' AND NOT r.reading
     AND NOT EXISTS (SELECT FROM aclexplode(p.proacl) AS pub
                      WHERE pub.grantee = 0 AND pub.privilege_type = 'EXECUTE')
  UNION ALL
  SELECT 11, 'USAGE fdw', 'USAGE on foreign-data wrapper ' || quote_ident(w.fdwname) || r.via
    FROM pg_foreign_data_wrapper w, roles r
   WHERE has_foreign_data_wrapper_privilege(r.oid, w.oid, 'USAGE')
  UNION ALL
  SELECT 11, 'USAGE server', 'USAGE on foreign server ' || quote_ident(s.srvname) || r.via
    FROM pg_foreign_server s, roles r WHERE has_server_privilege(r.oid, s.oid, 'USAGE')
  {parameters}
)
SELECT CASE WHEN EXISTS (SELECT FROM roles WHERE rolsuper)
            THEN ARRAY(SELECT 'superuser' || via FROM roles WHERE rolsuper ORDER BY 1 LIMIT 1)
            ELSE ARRAY(SELECT min(what) || CASE WHEN count(*) > 1
                                                THEN ' and ' || (count(*) - 1) || ' more'
                                                ELSE '' END
                         FROM findings GROUP BY ord, kind ORDER BY ord, kind) END
"""
#: PostgreSQL 15's grants on settings (`GRANT SET | ALTER SYSTEM ON PARAMETER`): ALTER SYSTEM
#: writes the server's configuration; SET of a setting ordinary roles may not set.
_POSTGRES_PARAMETERS = """
  UNION ALL
  SELECT 12, p, p || ' on parameter ' || a.parname || r.via
    FROM pg_parameter_acl a, roles r, unnest(ARRAY['SET', 'ALTER SYSTEM']) AS p
   WHERE has_parameter_privilege(r.oid, a.parname, p)
     AND (p = 'ALTER SYSTEM' OR NOT EXISTS (SELECT FROM pg_settings s
                                            WHERE s.name = a.parname AND s.context = 'user'))
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


def postgres_read_only_recipe(dbname: str, schema: str | None) -> str:
    """The statements, on one line, that create a read-only PostgreSQL role for `dbname`'s
    `schema` (default `public`)."""
    schema = schema or "public"
    return (
        "CREATE ROLE eval_reader LOGIN PASSWORD '…'; "
        f"GRANT CONNECT ON DATABASE {dbname} TO eval_reader; "
        f"GRANT USAGE ON SCHEMA {schema} TO eval_reader; "
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO eval_reader; "
        f"REVOKE TEMPORARY ON DATABASE {dbname} FROM PUBLIC;"
    )


def mysql_read_only_recipe(dbname: str) -> str:
    """The statements, on one line, that create a read-only MySQL/MariaDB user for `dbname`."""
    return (
        "CREATE USER 'eval_reader'@'%' IDENTIFIED BY '…'; "
        f"GRANT SELECT, SHOW VIEW ON {dbname or '<database>'}.* TO 'eval_reader'@'%';"
    )


def mysql_grants_held(grants: list[str]) -> tuple[list[str], list[str]]:
    """What `SHOW GRANTS` lines give beyond reading, and the roles they grant (to read next).

    A line is `GRANT <privileges> ON <what> TO <account> [WITH GRANT OPTION]`, or
    `GRANT <role> TO <account> [WITH ADMIN OPTION]` for a role; `PROXY`, `WITH GRANT OPTION`
    and `WITH ADMIN OPTION` count as held.
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
            role = body[: upper.rfind(" TO ")].strip()
            roles.append(role)
            if "WITH ADMIN OPTION" in upper:  # it may grant the role to anyone
                held.append(f"ADMIN OPTION on role {role}")
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

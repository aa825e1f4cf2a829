"""The connecting role's check on real servers: every role that can act as more than a reader is refused, naming what it holds.

Each role here is made by the server's owner as an administrator might, in one of the ways a
role can hold or take on more than reading (a role it can `SET ROLE` to, a column, a
sequence, a large object, something it owns, a grant on a setting); it is refused before
any statement with the read-only recipe, and a role that only reads still connects.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator

import psycopg
import pytest

from eval_pipeline.warehouses import ConnectionFailed, PrivilegedRole, connect
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import Server, mysql_connection

pytestmark = pytest.mark.slow

PROBE = "eval_t_probe"
#: How an administrator could give the probe role more than reading, and what the refusal
#: names. Helper roles are named eval_t_*; objects the owner keeps are dropped by name.
POSTGRES_ROLE_SHAPES = {
    "a NOINHERIT member of a superuser role": (
        [
            "CREATE ROLE eval_t_boss SUPERUSER NOLOGIN",
            f"ALTER ROLE {PROBE} NOINHERIT",
            f"GRANT eval_t_boss TO {PROBE}",
        ],
        "superuser (by SET ROLE eval_t_boss)",
    ),
    "a member, through a NOINHERIT role, of a role that writes": (
        [
            "CREATE ROLE eval_t_writer NOLOGIN",
            "GRANT INSERT ON orders TO eval_t_writer",
            "CREATE ROLE eval_t_middle NOLOGIN NOINHERIT",
            "GRANT eval_t_writer TO eval_t_middle",
            f"GRANT eval_t_middle TO {PROBE}",
        ],
        "INSERT on public.orders (by SET ROLE eval_t_writer)",
    ),
    "a member of a role that may create roles": (
        ["CREATE ROLE eval_t_admin CREATEROLE NOLOGIN", f"GRANT eval_t_admin TO {PROBE}"],
        "CREATEROLE (by SET ROLE eval_t_admin)",
    ),
    "a role that may write one table": (
        [f"GRANT INSERT ON orders TO {PROBE}"],
        "INSERT on public.orders",
    ),
    "an UPDATE grant on one column": (
        [f"GRANT UPDATE (amount) ON orders TO {PROBE}"],
        "UPDATE on columns of public.orders",
    ),
    "a TRIGGER grant": ([f"GRANT TRIGGER ON orders TO {PROBE}"], "TRIGGER on public.orders"),
    "SELECT it may grant on": (
        [f"GRANT SELECT ON orders TO {PROBE} WITH GRANT OPTION"],
        "SELECT WITH GRANT OPTION on public.orders",
    ),
    "USAGE and UPDATE on a sequence (nextval, setval)": (
        ["CREATE SEQUENCE eval_t_seq", f"GRANT USAGE, UPDATE ON SEQUENCE eval_t_seq TO {PROBE}"],
        "USAGE on sequence public.eval_t_seq",
    ),
    "the owner of a large object": (
        ["SELECT lo_create(464601)", f"ALTER LARGE OBJECT 464601 OWNER TO {PROBE}"],
        "owns large object 464601",
    ),
    "an UPDATE grant on a large object": (
        ["SELECT lo_create(464602)", f"GRANT UPDATE ON LARGE OBJECT 464602 TO {PROBE}"],
        "UPDATE on large object 464602",
    ),
    "the owner of a table it has no grant on": (
        [
            "CREATE TABLE eval_t_owned (x int)",
            f"ALTER TABLE eval_t_owned OWNER TO {PROBE}",
            f"REVOKE ALL ON eval_t_owned FROM {PROBE}",
        ],
        "owns table eval_t_owned",
    ),
    "the owner of a function": (
        [
            "CREATE FUNCTION eval_t_one() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 1'",
            f"ALTER FUNCTION eval_t_one() OWNER TO {PROBE}",
        ],
        "owns function eval_t_one()",
    ),
    "the owner of a schema": (
        [f"CREATE SCHEMA eval_t_schema AUTHORIZATION {PROBE}"],
        "owns schema eval_t_schema",
    ),
    "a member of pg_checkpoint": ([f"GRANT pg_checkpoint TO {PROBE}"], "member of pg_checkpoint"),
    "EXECUTE on a function the server keeps from PUBLIC": (
        [f"GRANT EXECUTE ON FUNCTION pg_read_file(text) TO {PROBE}"],
        "EXECUTE on pg_read_file(text)",
    ),
    "ALTER SYSTEM on a setting": (
        [f"GRANT ALTER SYSTEM ON PARAMETER archive_command TO {PROBE}"],
        "ALTER SYSTEM on parameter archive_command",
    ),
    "SET on a superuser's setting": (
        [f"GRANT SET ON PARAMETER log_statement TO {PROBE}"],
        "SET on parameter log_statement",
    ),
    "ADMIN OPTION on a role": (
        ["CREATE ROLE eval_t_team NOLOGIN", f"GRANT eval_t_team TO {PROBE} WITH ADMIN OPTION"],
        "ADMIN OPTION on role eval_t_team",
    ),
    "BYPASSRLS": ([f"ALTER ROLE {PROBE} BYPASSRLS"], "BYPASSRLS"),
    "USAGE on a foreign-data wrapper (CREATE SERVER)": (
        [
            "CREATE FOREIGN DATA WRAPPER eval_t_fdw",
            f"GRANT USAGE ON FOREIGN DATA WRAPPER eval_t_fdw TO {PROBE}",
        ],
        "USAGE on foreign-data wrapper eval_t_fdw",
    ),
}
#: What the owner drops after each case, besides the eval_t_* roles and what they own.
_OWNER_KEEPS = [
    "DROP SEQUENCE IF EXISTS eval_t_seq",
    "SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE oid IN (464601, 464602)",
    "DROP FOREIGN DATA WRAPPER IF EXISTS eval_t_fdw CASCADE",
    "DROP FUNCTION IF EXISTS eval_t_one()",
    "DROP TABLE IF EXISTS eval_t_owned",
]


@pytest.fixture
def probe(postgres: Server) -> Iterator[tuple[Server, psycopg.Connection]]:
    """A login role made with the read-only recipe, and the owner's session to change it."""
    password = "pr-" + secrets.token_hex(8)
    with psycopg.connect(postgres.owner.url, autocommit=True) as admin:
        for statement in (
            f"CREATE ROLE {PROBE} LOGIN PASSWORD '{password}'",
            f"GRANT CONNECT ON DATABASE {postgres.dbname} TO {PROBE}",
            f"GRANT USAGE ON SCHEMA public TO {PROBE}",
            f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {PROBE}",
        ):
            admin.execute(statement)
        try:
            yield dataclasses.replace(postgres, user=PROBE, password=password), admin
        finally:
            for statement in _OWNER_KEEPS:
                admin.execute(statement)
            roles = [
                name
                for (name,) in admin.execute(
                    "SELECT rolname FROM pg_roles WHERE rolname LIKE 'eval\\_t\\_%'"
                ).fetchall()
            ]
            admin.execute("DROP OWNED BY " + ", ".join(roles) + " CASCADE")
            admin.execute("DROP ROLE " + ", ".join(roles))


@pytest.mark.parametrize("shape", list(POSTGRES_ROLE_SHAPES))
def test_a_postgres_role_that_can_act_as_more_than_a_reader_is_refused_naming_how(probe, shape):
    role, admin = probe
    connect(database_of(role)).close()  # the recipe alone: a reader
    statements, named = POSTGRES_ROLE_SHAPES[shape]
    for statement in statements:
        admin.execute(statement)
    with pytest.raises(PrivilegedRole) as refused:
        connect(database_of(role))
    message = refused.value.message
    assert named in message, message
    assert "CREATE ROLE eval_reader LOGIN" in message and "allow_privileged_role" in message


def test_a_postgres_role_that_may_read_everything_and_the_statistics_connects(probe):
    role, admin = probe
    admin.execute(f"GRANT pg_read_all_data, pg_monitor TO {PROBE}")
    with connect(database_of(role)) as connection:
        connection.begin_read_only(5)
        rows = [
            b.to_pylist() for b in connection.stream("SELECT count(*) AS n FROM orders").batches
        ]
        connection.end()
    assert rows == [[{"n": 5}]]


@pytest.fixture
def mariadb_accounts(mariadb: Server) -> Iterator[tuple[Server, object]]:
    """The owner's session to make roles and users with; what it made is dropped after."""
    admin = mysql_connection(mariadb.owner, database=False)
    made: list[str] = []
    try:
        yield mariadb, (admin, made)
    finally:
        with admin.cursor() as cursor:
            for statement in reversed(made):
                cursor.execute(statement)
        admin.close()


def _account(mariadb_accounts, user: str, statements: list[str]) -> Server:
    """A MariaDB user made by `statements` ({user} in them), seen through the sandbox's eyes."""
    server, (admin, made) = mariadb_accounts
    password = "pr-" + secrets.token_hex(8)
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        made.append(f"DROP USER '{user}'@'%'")
        for statement in statements:
            cursor.execute(statement.format(user=f"'{user}'@'%'"))
            if statement.startswith("CREATE ROLE"):
                made.append("DROP ROLE " + statement.split()[2])
    return dataclasses.replace(server, user=user, password=password)


def test_a_mariadb_user_is_judged_by_the_roles_it_may_set(mariadb_accounts):
    roles = [
        "CREATE ROLE eval_t_read",
        "GRANT SELECT ON shop.* TO eval_t_read",
        "CREATE ROLE eval_t_write",
        "GRANT INSERT ON shop.orders TO eval_t_write",
        "CREATE ROLE eval_t_middle",
        "GRANT eval_t_write TO eval_t_middle",
    ]
    reader = _account(
        mariadb_accounts,
        "eval_t_reader",
        [*roles, "GRANT SELECT ON shop.* TO {user}", "GRANT eval_t_read TO {user}"],
    )
    # A granted role that is not the user's default is checked too, as the user may ask.
    with connect(database_of(reader)) as connection:
        connection.begin_read_only(5)
        rows = [
            b.to_pylist() for b in connection.stream("SELECT count(*) AS n FROM orders").batches
        ]
        connection.end()
    assert rows == [[{"n": 5}]]
    writer = _account(
        mariadb_accounts,
        "eval_t_writer",
        ["GRANT SELECT ON shop.* TO {user}", "GRANT eval_t_middle TO {user}"],
    )
    with pytest.raises(PrivilegedRole) as refused:
        connect(database_of(writer))
    assert "INSERT ON `shop`.`orders` (by SET ROLE `eval_t_middle`)" in refused.value.message
    assert "GRANT SELECT, SHOW VIEW ON shop.*" in refused.value.message
    admin = _account(
        mariadb_accounts,
        "eval_t_granter",
        ["GRANT SELECT ON shop.* TO {user}", "GRANT eval_t_read TO {user} WITH ADMIN OPTION"],
    )
    with pytest.raises(PrivilegedRole, match="ADMIN OPTION on role `eval_t_read`"):
        connect(database_of(admin))


def test_a_mariadb_user_reading_through_its_default_role_connects_and_reads(mariadb_accounts):
    by_default = _account(
        mariadb_accounts,
        "eval_t_default",
        [
            "CREATE ROLE eval_t_shop",
            "GRANT SELECT ON shop.* TO eval_t_shop",
            "GRANT eval_t_shop TO {user}",
            "SET DEFAULT ROLE eval_t_shop FOR {user}",
        ],
    )
    with connect(database_of(by_default)) as connection:
        connection.begin_read_only(5)
        batches = connection.stream("SELECT CURRENT_ROLE() AS r, count(*) AS n FROM orders")
        rows = [b.to_pylist() for b in batches.batches]
        connection.end()
    assert rows == [[{"r": "eval_t_shop", "n": 5}]]  # still in its default role
    # The same role not made its default: the server refuses the database, and says how.
    elsewhere = _account(
        mariadb_accounts,
        "eval_t_nodefault",
        ["GRANT eval_t_shop TO {user}"],
    )
    with pytest.raises(ConnectionFailed, match=r"SET DEFAULT ROLE <role> FOR <user>"):
        connect(database_of(elsewhere))

"""One small warehouse, loaded alike into DuckDB, PostgreSQL and MariaDB for cross-engine tests.

It holds the types whose trip through a driver can go wrong: DATE, TIMESTAMP with and without
zone, NUMERIC/DECIMAL, BOOLEAN and NULL. MariaDB stores both timestamps as DATETIME (its
TIMESTAMP converts through the session time zone) and BOOLEAN as TINYINT(1).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pytest

from eval_pipeline_tests.warehouses.servers import (
    Server,
    postgres_missing,
    postgres_server,
    read_only_role,
)

TABLE_COMMENTS = {"customers": "One row per customer", "orders": "One row per order"}

CUSTOMERS = [
    (1, "Ada", dt.date(2024, 1, 5), True, Decimal("1000.00")),
    (2, "Brian", dt.date(2024, 2, 29), False, None),
    (3, "Chloé", dt.date(2024, 3, 1), False, Decimal("250.50")),
    (4, "Dmitri", dt.date(2023, 12, 31), True, Decimal("99999.99")),
]
ORDERS = [
    (
        10,
        1,
        dt.datetime(2024, 3, 1, 9, 30),
        dt.datetime(2024, 3, 1, 9, 31, 5),
        Decimal("120.50"),
        "paid",
    ),
    (11, 1, dt.datetime(2024, 3, 2, 0, 0), None, Decimal("80.00"), None),
    (
        12,
        2,
        dt.datetime(2024, 3, 2, 23, 59, 59),
        dt.datetime(2024, 3, 3, 0, 0),
        Decimal("15.25"),
        "paid",
    ),
    (
        13,
        3,
        dt.datetime(2024, 4, 10, 12, 0),
        dt.datetime(2024, 4, 10, 12, 5),
        Decimal("300.00"),
        "refunded",
    ),
    (14, 4, dt.datetime(2024, 4, 11, 8, 15, 30), None, Decimal("0.01"), "open"),
]

_TYPES = {
    #           duckdb / postgres            mysql (MariaDB)
    "int": ("INTEGER", "INTEGER"),
    "text": ("VARCHAR(50)", "VARCHAR(50)"),
    "date": ("DATE", "DATE"),
    "bool": ("BOOLEAN", "BOOLEAN"),
    "money": ("NUMERIC(12, 2)", "DECIMAL(12, 2)"),
    "ts": ("TIMESTAMP", "DATETIME"),
    "tstz": ("TIMESTAMPTZ", "DATETIME"),
}
_COLUMNS = {
    "customers": [
        ("id", "int"),
        ("name", "text"),
        ("signup_date", "date"),
        ("is_vip", "bool"),
        ("credit_limit", "money"),
    ],
    "orders": [
        ("id", "int"),
        ("customer_id", "int"),
        ("ordered_at", "ts"),
        ("paid_at", "tstz"),
        ("amount", "money"),
        ("status", "text"),
    ],
}
_ROWS = {"customers": CUSTOMERS, "orders": ORDERS}


def load_statements(engine: str) -> list[str]:
    """The DDL and INSERTs that build the small warehouse on `engine` (duckdb|postgres|mysql)."""
    mysql = engine == "mysql"
    statements = []
    for table, columns in _COLUMNS.items():
        defs = ", ".join(f"{name} {_TYPES[kind][1 if mysql else 0]}" for name, kind in columns)
        if mysql:
            comment = TABLE_COMMENTS[table].replace("'", "''")
            statements.append(f"CREATE TABLE {table} ({defs}) COMMENT = '{comment}'")
        else:
            statements.append(f"CREATE TABLE {table} ({defs})")
            statements.append(f"COMMENT ON TABLE {table} IS '{TABLE_COMMENTS[table]}'")
        kinds = [kind for _, kind in columns]
        values = ", ".join(
            "(" + ", ".join(_literal(v, k, mysql) for v, k in zip(row, kinds, strict=True)) + ")"
            for row in _ROWS[table]
        )
        statements.append(f"INSERT INTO {table} VALUES {values}")
    return statements


def _literal(value: object, kind: str, mysql: bool) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
        return f"'{text}'" if mysql or kind == "ts" else f"'{text}+00:00'"
    if isinstance(value, dt.date):
        return f"'{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


@contextlib.contextmanager
def postgres_with_small_warehouse() -> Iterator[Server]:
    """A throwaway PostgreSQL 15 holding the small warehouse in its `public` schema, seen
    through a read-only role (its `owner` is the superuser that loaded it)."""
    import psycopg

    with postgres_server() as server:
        with psycopg.connect(server.url, autocommit=True) as connection:
            for statement in load_statements("postgres"):
                connection.execute(statement)
        yield read_only_role(server)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Server]:
    """A PostgreSQL 15 holding the small warehouse in its `public` schema."""
    if reason := postgres_missing():
        pytest.skip(reason)
    with postgres_with_small_warehouse() as server:
        yield server

"""One connection layer for DuckDB, PostgreSQL and MariaDB: typed results, schema text, clear faults."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

from eval_pipeline.suite import DatabaseConfig, Templated
from eval_pipeline.warehouses import (
    ConnectionFailed,
    StatementFailed,
    WarehouseConnection,
    connect,
    database_warnings,
    schema_description,
)
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import free_port


def read_frame(connection: WarehouseConnection, sql: str) -> pd.DataFrame:
    """The result of `sql`, read in a read-only transaction, as a DataFrame whose types
    survive the trip from the engine: DATE → `datetime.date`, TIMESTAMP → datetime64,
    TIMESTAMP WITH TIME ZONE → datetime64 in UTC, DECIMAL → `Decimal`, BOOLEAN → bool (MariaDB:
    0/1, it has no boolean type), NULL → None/NaN/NaT."""
    connection.begin_read_only(300.0)
    try:
        stream = connection.stream(sql)
        batches = list(stream.batches)
    finally:
        connection.end()
    if not batches:
        return pd.DataFrame({name: pd.Series([], dtype=object) for name in stream.columns})
    # Batches typed by inference (MySQL) may disagree, e.g. a first batch of only NULLs.
    table = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
    )
    frame = table.to_pandas(date_as_object=True, types_mapper=None)
    frame.columns = stream.columns
    return frame


def _value(frame: pd.DataFrame, column: str, row: int = 0):
    value = frame[column].iloc[row]
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else value


def test_reference_results_keep_their_types_on_every_engine(small_database):
    with connect(small_database) as connection:
        frame = read_frame(
            connection,
            "SELECT c.signup_date, o.ordered_at, o.paid_at, o.amount, c.is_vip, c.credit_limit "
            "FROM orders AS o JOIN customers AS c ON c.id = o.customer_id "
            "WHERE o.id IN (10, 12) ORDER BY o.id",
        )
    assert list(frame.columns) == [
        "signup_date", "ordered_at", "paid_at", "amount", "is_vip", "credit_limit"
    ]  # fmt: skip
    assert _value(frame, "signup_date") == dt.date(2024, 1, 5)
    assert pd.Timestamp(_value(frame, "ordered_at")) == pd.Timestamp("2024-03-01 09:30")
    paid = pd.Timestamp(_value(frame, "paid_at"))  # naive on MariaDB: DATETIME, stored in UTC
    paid = paid.tz_localize("UTC") if paid.tz is None else paid.tz_convert("UTC")
    assert paid == pd.Timestamp("2024-03-01 09:31:05", tz="UTC")
    assert _value(frame, "amount") == Decimal("120.50")
    assert isinstance(_value(frame, "amount"), Decimal)
    vip = _value(frame, "is_vip")
    if small_database.name == "small_mariadb":
        assert vip == 1 and not isinstance(vip, bool)  # MariaDB has no boolean type
    else:
        assert vip is True or vip == True  # noqa: E712 (numpy bool)
    assert _value(frame, "credit_limit", 1) is None  # Brian's NULL


def test_schema_description_lists_tables_columns_types_and_comments(small_database):
    with connect(small_database) as connection:
        text = schema_description(connection)
    assert f"Database '{small_database.name}'" in text
    assert "table customers — One row per customer" in text
    assert "table orders — One row per order" in text
    assert "  - signup_date date" in text and "  - amount " in text


def test_a_read_only_transaction_refuses_writes_and_the_session_goes_on(small_database):
    with connect(small_database) as connection:
        # Refused by the read-only role (MariaDB says so first) or the read-only transaction.
        with pytest.raises(StatementFailed, match=r"(?i)read.only|command denied"):
            read_frame(connection, "DELETE FROM orders")
        assert read_frame(connection, "SELECT count(*) AS n FROM orders")["n"].iloc[0] == 5


def test_a_wrong_password_is_named_without_the_password(postgres, mariadb):
    for server, cause in ((postgres, "password authentication failed"), (mariadb, "Access denied")):
        wrong = Templated(
            server.url.replace(server.password, "Wrong-Secret-1234"), secret="url_password"
        )
        database = DatabaseConfig("finance", server.kind, url=wrong)
        with pytest.raises(ConnectionFailed) as error:
            connect(database)
        assert "database 'finance'" in error.value.message and cause in error.value.message
        assert "Wrong-Secret" not in error.value.message


def test_check_databases_names_each_unusable_database_and_its_cause(postgres, tmp_path):
    down = f"postgresql://reader:Hidden-Pass-99@127.0.0.1:{free_port()}/x"
    databases = [
        database_of(postgres, name="ok"),
        DatabaseConfig("down", "postgres", url=Templated(down, secret="url_password")),
        database_of(postgres, name="noschema", schema="analytics"),
        DatabaseConfig("nofile", "duckdb", path=tmp_path / "missing.duckdb"),
        DatabaseConfig("nokey", "postgres", url=Templated("{{ env('EVAL_TEST_UNSET_URL') }}")),
    ]
    problems = database_warnings(databases)
    assert len(problems) == 4, problems
    down_line, schema_line, file_line, env_line = problems
    assert "'down'" in down_line and "Connection refused" in down_line
    assert "Hidden-Pass" not in down_line
    assert "'noschema'" in schema_line and "schema 'analytics' does not exist" in schema_line
    assert "'nofile'" in file_line and "file not found" in file_line
    assert "'nokey'" in env_line and "EVAL_TEST_UNSET_URL is not set" in env_line

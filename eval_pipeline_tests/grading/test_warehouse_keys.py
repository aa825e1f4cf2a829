"""Foreign keys read from DuckDB's constraints, or guessed from `<stem>_id` names."""

from __future__ import annotations

import duckdb

from eval_pipeline.grading import read_schema


def _schema(*statements: str):
    connection = duckdb.connect(":memory:")
    for statement in statements:
        connection.execute(statement)
    return read_schema(connection, "memory")


def _references(schema) -> set[tuple[str, str, str, str]]:
    return {(fk.table, fk.column, fk.parent, fk.parent_column) for fk in schema.foreign_keys}


def test_names_find_the_plural_table_its_suffix_and_the_last_words_of_the_stem() -> None:
    schema = _schema(
        "CREATE TABLE marketing_channels AS SELECT range AS channel_id FROM range(3)",
        "CREATE TABLE categories AS SELECT range AS id FROM range(3)",
        "CREATE TABLE customers AS SELECT range AS customer_id, range % 3 AS "
        "acquisition_channel_id, range % 3 AS category_id FROM range(9)",
        "CREATE TABLE orders AS SELECT range AS order_id, range % 9 AS customer_id FROM range(20)",
    )
    assert _references(schema) == {
        ("customers", "acquisition_channel_id", "marketing_channels", "channel_id"),
        ("customers", "category_id", "categories", "id"),
        ("orders", "customer_id", "customers", "customer_id"),
    }
    # parents come before the tables that reference them
    order = [t.name for t in schema.tables]
    assert order.index("customers") < order.index("orders")
    assert order.index("marketing_channels") < order.index("customers")
    assert {t.name: t.keys for t in schema.tables}["orders"] == ("order_id",)


def test_a_guess_that_is_ambiguous_or_not_unique_is_dropped() -> None:
    schema = _schema(
        # two tables could be `channel`: no guess
        "CREATE TABLE web_channels AS SELECT range AS channel_id FROM range(3)",
        "CREATE TABLE store_channels AS SELECT range AS channel_id FROM range(3)",
        # `users.id` repeats a value: not a key, so no guess
        "CREATE TABLE users AS SELECT range % 2 AS id FROM range(4)",
        "CREATE TABLE visits AS SELECT range AS id, range AS channel_id, 1 AS user_id FROM range(3)",
    )
    assert _references(schema) == set()


def test_declared_foreign_keys_win_over_names() -> None:
    schema = _schema(
        "CREATE TABLE people (id INTEGER PRIMARY KEY)",
        "CREATE TABLE customers (id INTEGER PRIMARY KEY)",
        "CREATE TABLE orders (id INTEGER, customer_id INTEGER, buyer INTEGER REFERENCES people (id))",
    )
    assert _references(schema) == {("orders", "buyer", "people", "id")}

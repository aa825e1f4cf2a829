"""What a warehouse holds, described for a model: tables, columns, types and comments."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa

from eval_pipeline.suite import engine_named
from eval_pipeline.warehouses._connection import WarehouseConnection

__all__ = ["TableSchema", "describe_tables", "schema_description"]

#: Seconds the catalogue queries may take.
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TableSchema:
    """One table of the connection's schema: its comment and (column, type, comment)s."""

    name: str
    comment: str
    columns: tuple[tuple[str, str, str], ...]


def describe_tables(connection: WarehouseConnection) -> list[TableSchema]:
    """The tables of the connection's current schema, from the engine's catalogue
    (`Engine.catalogue_sql`), read in a read-only transaction, so it needs no dbt project."""
    tables: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    comments: dict[str, str] = {}
    for table, column, kind, table_comment, column_comment in _catalogue_rows(connection):
        comments[table] = table_comment or ""
        tables[table].append((column, str(kind).lower(), column_comment or ""))
    return [TableSchema(name, comments[name], tuple(columns)) for name, columns in tables.items()]


def schema_description(connection: WarehouseConnection) -> str:
    """The tables of the connection's schema as text: one line per table and per column."""
    database = connection.database
    where = f", schema {database.schema}" if database.schema else ""
    label = engine_named(database.type).label
    lines = [f"Database {database.name!r} ({label} SQL{where}):"]
    tables = describe_tables(connection)
    for table in tables:
        lines.append(f"table {table.name}" + (f" — {table.comment}" if table.comment else ""))
        lines.extend(
            f"  - {name} {kind}" + (f" — {comment}" if comment else "")
            for name, kind, comment in table.columns
        )
    if not tables:
        lines.append("(no tables visible to this user)")
    return "\n".join(lines)


def _catalogue_rows(connection: WarehouseConnection) -> list[tuple]:
    connection.begin_read_only(_TIMEOUT_S)
    try:
        stream = connection.stream(engine_named(connection.database.type).catalogue_sql)
        batches = list(stream.batches)
    finally:
        connection.end()
    # By position: both comment columns are called `comment` on DuckDB.
    columns = [pa.Table.from_batches([b]).columns for b in batches]
    return [row for parts in columns for row in zip(*(c.to_pylist() for c in parts), strict=True)]

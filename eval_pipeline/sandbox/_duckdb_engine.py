"""DuckDB as a warehouse engine: its files, run in this process by the locked-down `SqlSandbox`."""

from __future__ import annotations

from eval_pipeline.sandbox._sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.suite import DUCKDB, DatabaseConfig, Engine
from eval_pipeline.warehouses import DuckDBConnection

__all__ = ["ENGINE"]


def _sandbox(database: DatabaseConfig, limits: SandboxLimits) -> SqlSandbox:
    assert database.path is not None  # a file engine's database always has one
    return SqlSandbox.for_file(database.path, limits=limits)


ENGINE = Engine(
    name=DUCKDB,
    label="DuckDB",
    dialect="duckdb",
    connect=DuckDBConnection,
    # Its statement rules are the sandbox's own (DuckDB's parser, settings locked): no
    # `reading_statement`, since no statement reaches DuckDB but through `SqlSandbox`.
    own_sandbox=_sandbox,
    nao_type="duckdb",
    catalogue_sql="""
        SELECT c.table_name, c.column_name, c.data_type, t.comment, c.comment
        FROM duckdb_columns() AS c
        JOIN duckdb_tables() AS t USING (database_name, schema_name, table_name)
        WHERE NOT c.internal AND c.schema_name = current_schema()
        ORDER BY c.table_name, c.column_index
    """,
)

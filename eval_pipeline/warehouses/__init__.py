"""Warehouses: sessions on each engine's databases (DuckDB, PostgreSQL, MySQL/MariaDB, ClickHouse, or one a package adds), read-only streams and schema text."""

from eval_pipeline.warehouses._bigquery import CATALOGUE as BIGQUERY_CATALOGUE
from eval_pipeline.warehouses._bigquery import (
    MAXIMUM_BYTES_BILLED,
    BigQueryConnection,
    bytes_text,
    dry_run_bytes,
    on_demand_usd,
)
from eval_pipeline.warehouses._clickhouse import ClickHouseConnection
from eval_pipeline.warehouses._connect import StableCallables, WarehouseConnection, connect
from eval_pipeline.warehouses._connection import (
    SERVER_SIZE,
    SERVER_TEXT,
    CellBounds,
    Stream,
)
from eval_pipeline.warehouses._duckdb import DuckDBConnection
from eval_pipeline.warehouses._errors import (
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    WarehouseError,
)
from eval_pipeline.warehouses._mysql import MySqlConnection
from eval_pipeline.warehouses._postgres import PostgresConnection
from eval_pipeline.warehouses._preflight import database_warnings
from eval_pipeline.warehouses._privileges import (
    PrivilegedRole,
    judge_privileges,
    privileged_role_warning,
)
from eval_pipeline.warehouses._schema import TableSchema, describe_tables, schema_description
from eval_pipeline.warehouses._snowflake import SnowflakeConnection, snowflake_options

__all__ = [
    "BIGQUERY_CATALOGUE",
    "MAXIMUM_BYTES_BILLED",
    "SERVER_SIZE",
    "SERVER_TEXT",
    "BigQueryConnection",
    "CellBounds",
    "ClickHouseConnection",
    "ConnectionFailed",
    "DuckDBConnection",
    "MySqlConnection",
    "PostgresConnection",
    "PrivilegedRole",
    "SnowflakeConnection",
    "StableCallables",
    "StatementFailed",
    "StatementTimeout",
    "Stream",
    "TableSchema",
    "WarehouseConnection",
    "WarehouseError",
    "bytes_text",
    "connect",
    "database_warnings",
    "describe_tables",
    "dry_run_bytes",
    "judge_privileges",
    "on_demand_usd",
    "privileged_role_warning",
    "schema_description",
    "snowflake_options",
]

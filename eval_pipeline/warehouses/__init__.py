"""Warehouses: connections to DuckDB, PostgreSQL and MySQL/MariaDB, read-only streams and schema text."""

from eval_pipeline.warehouses._connect import StableCallables, WarehouseConnection, connect
from eval_pipeline.warehouses._connection import SERVER_SIZE, SERVER_TEXT, CellBounds
from eval_pipeline.warehouses._errors import (
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    WarehouseError,
)
from eval_pipeline.warehouses._preflight import database_warnings
from eval_pipeline.warehouses._privileges import PrivilegedRole, privileged_role_warning
from eval_pipeline.warehouses._schema import (
    ENGINE_NAMES,
    TableSchema,
    describe_tables,
    schema_description,
)

__all__ = [
    "ENGINE_NAMES",
    "SERVER_SIZE",
    "SERVER_TEXT",
    "CellBounds",
    "ConnectionFailed",
    "PrivilegedRole",
    "StableCallables",
    "StatementFailed",
    "StatementTimeout",
    "TableSchema",
    "WarehouseConnection",
    "WarehouseError",
    "connect",
    "database_warnings",
    "describe_tables",
    "privileged_role_warning",
    "schema_description",
]

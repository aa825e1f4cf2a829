"""Connections to a warehouse, one kind per engine, behind one small interface of Arrow batches.

PostgreSQL goes through ADBC (`adbc-driver-postgresql`: binary COPY into Arrow, measured
~1.9× faster and ~6× leaner than pandas over psycopg, see docs/warehouses.md); MySQL and
MariaDB, which have no ADBC driver on PyPI, through PyMySQL with rows turned into Arrow
batches; DuckDB files through DuckDB itself. Every kind streams `pa.RecordBatch`es, so row
caps, cell caps and value conversion are the same code for every engine.
"""

from __future__ import annotations

from eval_pipeline.suite import DatabaseConfig, MissingSecret
from eval_pipeline.warehouses._connection import StableCallables, Stream, WarehouseConnection
from eval_pipeline.warehouses._errors import ConnectionFailed

__all__ = ["StableCallables", "Stream", "WarehouseConnection", "connect"]


def connect(database: DatabaseConfig) -> WarehouseConnection:
    """Open a session on `database`, checking that it answers and has its configured schema.

    Raises:
        ConnectionFailed: unreachable server, refused login, missing schema or file, unset
            environment variable; the message names the database and never the password.
    """
    # Imported here: a suite on DuckDB alone never loads a server driver.
    if database.type == "duckdb":
        from eval_pipeline.warehouses._duckdb import DuckDBConnection

        return DuckDBConnection(database)
    try:
        url = database.resolve_url()
    except MissingSecret as error:
        raise ConnectionFailed(
            f"database {database.name!r} ({database.type}): {error.problems[0].message}"
        ) from None
    if database.type == "postgres":
        from eval_pipeline.warehouses._postgres import PostgresConnection

        return PostgresConnection(database, url)
    from eval_pipeline.warehouses._mysql import MySqlConnection

    return MySqlConnection(database, url)

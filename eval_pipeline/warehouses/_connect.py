"""Connections to a warehouse, one kind per engine (`Engine.connect`), behind one small interface of Arrow batches.

PostgreSQL goes through ADBC (`adbc-driver-postgresql`: binary COPY into Arrow, measured
~1.9× faster and ~6× leaner than pandas over psycopg, see docs/warehouses.md); MySQL and
MariaDB, which have no ADBC driver on PyPI, through PyMySQL with rows turned into Arrow
batches; DuckDB files through DuckDB itself. Every kind streams `pa.RecordBatch`es, so row
caps, cell caps and value conversion are the same code for every engine.
"""

from __future__ import annotations

from eval_pipeline.suite import DatabaseConfig, MissingSecret, engine_named
from eval_pipeline.warehouses._connection import StableCallables, Stream, WarehouseConnection
from eval_pipeline.warehouses._errors import ConnectionFailed

__all__ = ["StableCallables", "Stream", "WarehouseConnection", "connect"]


def connect(database: DatabaseConfig) -> WarehouseConnection:
    """Open a session on `database`, checking that it answers and has its configured schema.

    Raises:
        ConnectionFailed: unreachable server, refused login, missing schema or file, unset
            environment variable; the message names the database and never the password.
    """
    engine = engine_named(database.type)
    try:
        connection = engine.connect(database)
    except MissingSecret as error:  # its URL reads a variable that is not set
        raise ConnectionFailed(
            f"database {database.name!r} ({database.type}): {error.problems[0].message}"
        ) from None
    if not isinstance(connection, WarehouseConnection):
        raise TypeError(
            f"the {engine.label} engine's connect gave {type(connection).__name__}, "
            "not a WarehouseConnection"
        )
    return connection

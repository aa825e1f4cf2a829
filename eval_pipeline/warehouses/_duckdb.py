"""DuckDB files as a warehouse session of the common interface (reference SQL, schema text)."""

from __future__ import annotations

import contextlib
import threading

import duckdb

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._connection import Stream, WarehouseConnection
from eval_pipeline.warehouses._errors import (
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    short_cause,
)

__all__ = ["DuckDBConnection"]


class DuckDBConnection(WarehouseConnection):
    dialect = "duckdb"

    def __init__(self, database: DatabaseConfig) -> None:
        super().__init__(database)
        path = database.path
        if path is None or not path.is_file():
            raise ConnectionFailed(f"{self.label}: file not found: {path}")
        try:
            self._connection = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as error:
            raise ConnectionFailed(f"{self.label}: cannot open {path}: {error}") from None
        self._timer: threading.Timer | None = None

    def begin_read_only(self, timeout_s: float) -> None:
        self.end()
        self._connection.execute("BEGIN TRANSACTION")
        self._timer = threading.Timer(timeout_s, self.cancel)
        self._timer.daemon = True
        self._timer.start()

    def stream(self, sql: str) -> Stream:
        try:
            relation = self._connection.sql(sql)
            if relation is None:
                return Stream([], [], iter(()))
            reader = relation.to_arrow_reader(1024)
        except duckdb.InterruptException:
            raise StatementTimeout(f"{self.label}: the statement was stopped") from None
        except duckdb.Error as error:
            raise StatementFailed(short_cause(error)) from None
        return Stream(list(relation.columns), [str(t) for t in relation.types], iter(reader))

    def cancel(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.interrupt()

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        with contextlib.suppress(duckdb.Error):
            self._connection.execute("ROLLBACK")

    def close(self) -> None:
        self.end()
        self._connection.close()

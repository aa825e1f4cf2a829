"""A toy warehouse engine added from outside the package, in this one file: SQLite files.

What docs/extending.md walks through, as a package of its own would write it: a session
class of the common interface, the sandbox's statement rules and one `Engine` value, found
through the `eval_pipeline.engines` entry-point group. Its defences come from SQLite first:
the file is opened read-only (`mode=ro`), `PRAGMA query_only` refuses every write, and an
authorizer (SQLite's own hook, called for each action as it compiles a statement) lets only
reads and functions through; the sandbox's rules then take one SELECT as sqlglot reads it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from eval_pipeline.sandbox import ForbiddenStatement, QueryFailed
from eval_pipeline.suite import DatabaseConfig, Engine
from eval_pipeline.warehouses import (
    ConnectionFailed,
    StableCallables,
    StatementFailed,
    StatementTimeout,
    Stream,
    WarehouseConnection,
)

#: What SQLite may do while compiling a statement of a session: read, call a function, and
#: the transaction the sandbox wraps each statement in; pragma functions only to list columns.
_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_TRANSACTION,
}
_TYPES = {"int64": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "binary": "BLOB"}


def _reads_only(action: int, first: str | None, *_: object) -> int:
    if action in _ALLOWED or (action == sqlite3.SQLITE_PRAGMA and first == "table_info"):
        return sqlite3.SQLITE_OK
    # SQLite asks for UPDATE on its schema table whenever a query reads it; no write can
    # follow on a file opened read-only with query_only on.
    if action == sqlite3.SQLITE_UPDATE and first == "sqlite_master":
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class SqliteConnection(WarehouseConnection):
    """One read-only session on a SQLite file."""

    def __init__(self, database: DatabaseConfig) -> None:
        super().__init__(database)
        path = database.path
        if path is None or not path.is_file():
            raise ConnectionFailed(f"{self.label}: file not found: {path}")
        self._db = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA query_only = ON")
        self._db.set_authorizer(_reads_only)
        self._timer: threading.Timer | None = None

    def begin_read_only(self, timeout_s: float) -> None:
        self.end()
        self._db.execute("BEGIN")
        self._timer = threading.Timer(timeout_s, self.cancel)
        self._timer.daemon = True
        self._timer.start()

    def stream(self, sql: str, bounds: object = None) -> Stream:
        try:
            cursor = self._db.execute(sql)
            rows = cursor.fetchall()
        except sqlite3.OperationalError as error:
            if "interrupted" in str(error):
                raise StatementTimeout(f"{self.label}: the statement was stopped") from None
            raise StatementFailed(str(error)) from None
        except sqlite3.Error as error:
            raise StatementFailed(str(error)) from None
        names = [column[0] for column in cursor.description or ()]
        arrays = [pa.array([row[i] for row in rows]) for i in range(len(names))]
        arrays = [a.cast(pa.string()) if a.type == pa.null() else a for a in arrays]
        batch = pa.RecordBatch.from_arrays(arrays, names=names)
        types = [_TYPES.get(str(a.type), "VARCHAR") for a in arrays]
        return Stream(names, types, iter([batch]))

    def cancel(self) -> None:
        self._db.interrupt()

    def end(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.end()
        self._db.close()


def reading_statement(sql: str, stable: StableCallables) -> str:
    """The sandbox's rules: one SELECT (WITH, UNION included); the authorizer does the rest."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except (ParseError, TokenError) as error:
        raise QueryFailed(f"The query could not be read: {error}", sql=sql) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ForbiddenStatement("Send exactly one SELECT statement per call.", sql=sql)
    return sql


ENGINE = Engine(
    name="sqlite",
    label="SQLite",
    dialect="sqlite",
    connect=SqliteConnection,
    reading_statement=reading_statement,
    catalogue_sql="""
        SELECT m.name, c.name, c.type, '', ''
        FROM sqlite_master AS m, pragma_table_info(m.name) AS c
        WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
        ORDER BY m.name, c.cid
    """,
)

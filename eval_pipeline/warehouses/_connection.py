"""The one interface every warehouse session offers: a read-only transaction and Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig

__all__ = [
    "CONNECT_TIMEOUT_S",
    "SERVER_SIZE",
    "SERVER_TEXT",
    "CellBounds",
    "StableCallables",
    "Stream",
    "WarehouseConnection",
]

#: Seconds to wait for a server to accept a connection.
CONNECT_TIMEOUT_S = 10
#: The trailing columns of a stream whose server withheld cells (`Stream.server_cells`), one
#: list entry per result column: the text that stands for the cell (the server's text of a
#: value the client cannot convert, or the start of a cut text), and the full size in bytes
#: of a cell the server cut.
SERVER_TEXT = "eval_server_text"
SERVER_SIZE = "eval_server_size"


@dataclass(frozen=True)
class CellBounds:
    """How much of a row a server may send: no cell over `cell_bytes` (it is cut) and no row
    over `row_bytes` (its cells are withheld, and the sandbox keeps no row past it)."""

    cell_bytes: int
    row_bytes: int


@dataclass
class Stream:
    """A running statement's result: column names, their DuckDB types and Arrow batches.

    DuckDB type names for every engine: results of every engine load into DuckDB alike
    (answer extraction), and compare alike.
    """

    columns: list[str]
    column_types: list[str]
    batches: Iterator[pa.RecordBatch]
    #: The batches end with SERVER_TEXT and SERVER_SIZE (not in `columns`).
    server_cells: bool = False
    #: Set when the batches stopped at a row over the bounds' `row_bytes`, which the client
    #: refused to read (the rows before it are the result).
    refused_row: bool = False


@dataclass(frozen=True)
class StableCallables:
    """What the server declares immutable or stable, by bare and schema-qualified name:
    the functions and operators whose every overload changes nothing and reaches nothing
    outside the query (PostgreSQL's `provolatile`; empty where an engine keeps no such mark)."""

    functions: frozenset[str] = frozenset()
    operators: frozenset[str] = frozenset()


class WarehouseConnection:
    """One session on one database. Not thread-safe, except `cancel` (from a watchdog).

    Use: `begin_read_only(timeout)`, `stream(sql)`, read the batches, `end()`; repeat.
    """

    dialect: str  # sqlglot's name for the SQL dialect

    def __init__(self, database: DatabaseConfig) -> None:
        self.database = database
        #: The session could not be reset (the server went away): close it, open another.
        self.broken = False
        #: What the agent's SQL may call, as the server declares it (read when it opens).
        self.stable = StableCallables()

    @property
    def label(self) -> str:
        return f"database {self.database.name!r} ({self.database.type})"

    def begin_read_only(self, timeout_s: float) -> None:
        """Start a read-only transaction whose statements the server stops after `timeout_s`."""
        raise NotImplementedError

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        """Run `sql` and stream its result; with `bounds`, no row the server sends passes them
        (cut or withheld, as `Stream.server_cells` says), or the stream stops before it."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the running statement on the server (safe from another thread)."""
        raise NotImplementedError

    def end(self) -> None:
        """Roll back, dropping whatever the statement left (an unread result, an aborted state)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> WarehouseConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

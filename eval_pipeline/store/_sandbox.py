"""What `eval-pipeline sql` runs: one reading statement, with no file access beyond the store."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._database import connect, named_views
from eval_pipeline.store._files import ensure_schema_files
from eval_pipeline.store._published import published_current
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES

# One statement that reads (DESCRIBE, SHOW, SUMMARIZE and FROM-first queries parse as
# SELECT), never COPY, ATTACH, SET, PRAGMA or several at once.
_READING = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)


#: What the SQL prompt's `.tables` runs: the store's tables and views, by name.
TABLE_LISTING = "SELECT table_name AS name FROM information_schema.tables ORDER BY 1"

# How long a stopped query may take to wind down before the command goes on without it.
_STOP_WAIT_S = 10.0
_INTERRUPT_EVERY_S = 0.05


class NotReadOnly(ValueError):
    """A statement given to `fetch_read_only` could change or reach beyond the results."""


class QueryTooSlow(ValueError):
    """A `fetch_read_only` query ran past its time limit and was stopped."""


@dataclass(frozen=True)
class ReadLimits:
    """What one `fetch_read_only` query may use, as the agent's sandbox is bounded.

    Args:
        timeout_s: wall-clock seconds, fetching included; past it the query is interrupted.
        memory_limit: DuckDB's `memory_limit` (the machine's 80 % by default).
        max_temp_size: DuckDB's `max_temp_directory_size`, the spill to disk (90 % of the
            free disk by default).
    """

    timeout_s: float = 300.0
    memory_limit: str = "2GB"
    max_temp_size: str = "4GB"


def fetch_read_only(
    layout: StateFolder, sql: str, limits: ReadLimits | None = None
) -> tuple[list[str], list[tuple]]:
    """Run one reading statement on the results, with no file access beyond the store; its
    column names and every row (`head_read_only`: the first rows and how many there are).

    It reads results.duckdb (read-only) when that holds the store as it is now, the fastest
    (its tables need no file listed nor opened), else the views in memory (`connect`). The
    connection reads files only under the store's tables folder and its configuration is
    locked, so neither `COPY … TO`, `read_text('/etc/…')` nor `ATTACH` can reach a file;
    several statements, or one that is not a query, raise `NotReadOnly`. Time, memory and
    spill are bounded by `limits`.

    Raises:
        NotReadOnly: not one reading statement.
        QueryTooSlow: stopped at `limits.timeout_s`.
        KeyboardInterrupt: Ctrl-C while it ran.
    """
    columns, rows, _ = _read_only(layout, sql, limits, _every_row)
    return columns, rows


def head_read_only(
    layout: StateFolder, sql: str, max_rows: int, limits: ReadLimits | None = None
) -> tuple[list[str], list[tuple], int]:
    """`fetch_read_only`, but only its first `max_rows` rows, and the number of all its rows:
    what a table on the terminal shows.

    Turning rows into Python tuples is what a large result costs, not finding them: DuckDB
    selects one model's 219k grades of a 2.19M-run history in 10-20 ms, and Python takes
    150-600 ms to build their 438k strings (2 loaded cores). The rows not shown are only
    counted, as Arrow batches, which builds no Python object.

    Raises:
        NotReadOnly: not one reading statement.
        QueryTooSlow: stopped at `limits.timeout_s`.
        KeyboardInterrupt: Ctrl-C while it ran.
    """
    return _read_only(layout, sql, limits, lambda cursor: _head(cursor, max_rows))


def _every_row(cursor: duckdb.DuckDBPyConnection) -> tuple[list[tuple], int]:
    rows = cursor.fetchall()
    return rows, len(rows)


def _head(cursor: duckdb.DuckDBPyConnection, max_rows: int) -> tuple[list[tuple], int]:
    rows = cursor.fetchmany(max_rows)
    if len(rows) < max_rows:
        return rows, len(rows)
    # DuckDB warns that Arrow from a DB-API result copies the rows: a copy is what counting
    # them needs, and far cheaper than the Python objects fetchall would build.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Arrow output on a DB-API result", UserWarning)
        rest = cursor.to_arrow_reader()
    return rows, len(rows) + sum(batch.num_rows for batch in rest)


def _read_only(
    layout: StateFolder,
    sql: str,
    limits: ReadLimits | None,
    fetch: Callable[[duckdb.DuckDBPyConnection], tuple[list[tuple], int]],
) -> tuple[list[str], list[tuple], int]:
    """`fetch_read_only` with `fetch` taking the rows wanted from the executed statement and
    counting them all: (columns, rows, row count)."""
    limits = limits or ReadLimits()

    def run() -> tuple[list[str], list[tuple], int]:
        with _reading(layout, sql) as connection:
            _require_one_reading(connection, sql)
            connection.execute("SET allowed_directories = ?", [_store_directories(layout)])
            connection.execute("SET enable_external_access = false")
            connection.execute("SET memory_limit = ?", [limits.memory_limit])
            connection.execute("SET max_temp_directory_size = ?", [limits.max_temp_size])
            connection.execute("SET lock_configuration = true")
            return _fetch_interruptibly(connection, sql, limits.timeout_s, fetch)

    return with_recovery(layout, run)


def _require_one_reading(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise `NotReadOnly` unless `sql` is one reading statement. Parsed by the connection
    that will run it, before it runs anything: a connection of its own would cost as much
    again as the query (a new in-memory database: 10-40 ms)."""
    statements = connection.extract_statements(sql)
    if len(statements) != 1:
        raise NotReadOnly(f"give one SQL statement, not {len(statements)}")
    if statements[0].type not in _READING:
        raise NotReadOnly(
            f"only queries run here (SELECT, DESCRIBE, SUMMARIZE…), not {statements[0].type.name}"
        )


def _fetch_interruptibly(
    connection: duckdb.DuckDBPyConnection,
    sql: str,
    timeout_s: float,
    fetch: Callable[[duckdb.DuckDBPyConnection], tuple[list[tuple], int]],
) -> tuple[list[str], list[tuple], int]:
    """Run the query on a worker thread while this one waits, so that Ctrl-C (delivered to
    the main thread, between Python instructions) and the time limit both reach DuckDB as
    `interrupt()`, which stops a running query within moments. DuckDB does not watch for
    SIGINT itself while a query runs.

    Raises:
        QueryTooSlow: past `timeout_s`.
        KeyboardInterrupt: Ctrl-C.
    """
    outcome: dict[str, object] = {}
    done = threading.Event()  # not Thread.join: a join that Ctrl-C breaks ends its thread's state

    def work() -> None:
        try:
            cursor = connection.execute(sql)
            columns = [column[0] for column in cursor.description or []]
            outcome["result"] = (columns, *fetch(cursor))
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error
        finally:
            done.set()

    threading.Thread(target=work, name="eval-pipeline-sql", daemon=True).start()
    try:
        finished = done.wait(timeout_s)
    except KeyboardInterrupt:
        _stop(connection, done)
        raise
    if not finished:
        _stop(connection, done)
        raise QueryTooSlow(
            f"the query was stopped after {timeout_s:g} s (--timeout); "
            "filter or aggregate more, or allow it longer"
        )
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]


def _stop(connection: duckdb.DuckDBPyConnection, done: threading.Event) -> None:
    """Interrupt the query until its thread says it ended, for `_STOP_WAIT_S` at most. Once
    is not enough: an interrupt that comes before the thread has started the query (a
    loaded machine, Ctrl-C at once) stops nothing, the query then runs on, and closing the
    connection waits for it."""
    for _ in range(int(_STOP_WAIT_S / _INTERRUPT_EVERY_S)):
        connection.interrupt()
        if done.wait(_INTERRUPT_EVERY_S):
            return


def _reading(layout: StateFolder, sql: str) -> contextlib.AbstractContextManager:
    # Opened and closed per statement: this process never holds two connections to the file,
    # so DuckDB's per-process cache of open databases never serves a replaced one.
    if published_current(layout):
        return contextlib.closing(duckdb.connect(str(layout.database), read_only=True))
    # A store no evaluation has written yet holds empty tables, not missing ones.
    ensure_schema_files(layout)
    return connect(layout, views=named_views(sql))


def _store_directories(layout: StateFolder) -> list[str]:
    """The folders `fetch_read_only` may read: the tables folder, and each table's and the
    segments' folder as the views spell them (relative). DuckDB checks the path as written,
    and looks a relative path up in the working folder too when the store lacks it, so the
    relative ones name the table folders, not all of `store/`."""
    if layout.remote:
        return [layout.location + "/"]
    relative = [layout.table_dir(name) for name in TABLES] + [layout.segments_root]
    return [layout.tables_dir.resolve().as_posix() + "/"] + [
        Path(folder).relative_to(layout.root).as_posix() + "/" for folder in relative
    ]

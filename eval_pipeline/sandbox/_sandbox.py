"""The SQL sandbox: one read-only query at a time on a locked-down DuckDB, with a time limit and row caps."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from eval_pipeline.sandbox._deadlines import Deadline, call_after
from eval_pipeline.sandbox._duckdb_cells import bounded_relation
from eval_pipeline.sandbox._duckdb_statements import require_reading_statement
from eval_pipeline.sandbox._result_fetch import FetchCaps, fetch_capped
from eval_pipeline.sandbox._sandbox_errors import (
    MAX_ENGINE_MESSAGE,
    ForbiddenStatement,
    QueryFailed,
    QueryTimeout,
    SandboxError,
)
from eval_pipeline.sandbox._sql_result import QueryResult
from eval_pipeline.suite import Limits, truncate
from eval_pipeline.warehouses import CellBounds

__all__ = ["SandboxLimits", "SqlSandbox"]


@dataclass(frozen=True)
class SandboxLimits:
    """How much one query may take, and how much of its result is kept and shown.

    Args:
        timeout_s: wall-clock limit per query, fetching included; past it the query is
            interrupted.
        store_max_rows: rows fetched and kept (for grading); the rest is never materialised.
        store_max_bytes: bytes of rows kept; the rows after are never materialised and the
            result is marked cut (a row cap alone lets 10,000 rows of 100 KB through).
        max_stored_cell_bytes: a longer text is cut, a larger list or struct replaced by a
            note, before it becomes a Python value; both are marked in the cell.
        model_max_rows: rows shown to the model by `SqlSandbox.render`; the model needs a
            sample and the row count, not the whole result, and every row costs tokens.
        max_cell_chars: longer cell values are cut in the model's view (not in `rows`).
        model_max_chars: the whole text shown to the model for one result.
        memory_limit: DuckDB `memory_limit` for the whole database instance, so it is shared
            by every query running at once on the same sandbox.
        threads: DuckDB worker threads; None keeps DuckDB's default (one per core).
        spill_directory: where DuckDB may spill intermediate results. None (the default)
            disables spilling, so a runaway query fails with "out of memory" instead of filling
            a disk; when set, spilling is capped at `max_spill_size`.
        max_spill_size: cap on the spill directory, as DuckDB's `max_temp_directory_size`.
    """

    timeout_s: float = 30.0
    store_max_rows: int = 10_000
    store_max_bytes: int = 8_000_000
    max_stored_cell_bytes: int = 65_536
    model_max_rows: int = 100
    max_cell_chars: int = 200
    model_max_chars: int = 20_000
    memory_limit: str = "1GB"
    threads: int | None = None
    spill_directory: Path | None = None
    max_spill_size: str = "1GB"

    @classmethod
    def from_config(cls, limits: Limits) -> SandboxLimits:
        """The built-in agent's sandbox limits from the `limits:` block of eval_config.yaml."""
        return cls(
            timeout_s=limits.query_timeout_s,
            store_max_rows=limits.query_max_rows,
            store_max_bytes=limits.query_max_bytes,
            max_stored_cell_bytes=limits.query_cell_max_bytes,
            model_max_rows=min(cls.model_max_rows, limits.query_max_rows),
            model_max_chars=limits.model_result_max_chars,
            memory_limit=limits.query_memory_limit,
        )

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if not 1 <= self.model_max_rows <= self.store_max_rows:
            raise ValueError("need 1 <= model_max_rows <= store_max_rows")

    def fetch_caps(self) -> FetchCaps:
        """What one query may keep for the store, with its deadline starting now."""
        return FetchCaps(
            max_rows=self.store_max_rows,
            max_bytes=self.store_max_bytes,
            max_cell_bytes=self.max_stored_cell_bytes,
            deadline=time.monotonic() + self.timeout_s,
            timeout_s=self.timeout_s,
        )

    def render(self, result: QueryResult) -> str:
        """What goes back to the model: `result.to_text` capped at these limits."""
        return result.to_text(
            max_rows=self.model_max_rows,
            max_cell_chars=self.max_cell_chars,
            max_chars=self.model_max_chars,
        )


class SqlSandbox:
    """Runs one read-only statement per call against a locked-down DuckDB database.

    Thread-safe: every call gets its own cursor (a connection to the shared database
    instance), so `asyncio.to_thread(sandbox.execute, sql)` may run many queries at once.
    Defences are layered: the statement type is checked with DuckDB's own parser; the database
    is read-only (a file) or each query runs in a transaction that is rolled back (in memory);
    `enable_external_access=false` blocks files, URLs and extensions; `lock_configuration`
    stops settings changes; the timer interrupts slow queries.
    """

    #: sqlglot's name for the SQL it runs, and the engine as the model is told it (the same
    #: two a `ServerSandbox` gives for its engine).
    dialect = "duckdb"
    engine_name = "DuckDB"

    def __init__(
        self,
        connection: duckdb.DuckDBPyConnection,
        limits: SandboxLimits,
        *,
        read_only: bool = False,
    ) -> None:
        """Wrap an already locked connection; use `for_file` or `in_memory` instead.

        `read_only`: the database refuses every write itself, so no query needs a
        transaction rolled back after it (which costs about a millisecond a query).
        """
        self._connection: duckdb.DuckDBPyConnection | None = connection
        self._rolls_back = not read_only
        # Turns kept Arrow batches into Python values; it never sees the agent's SQL.
        self._converter = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        self.limits = limits

    @classmethod
    def for_file(cls, path: str | Path, *, limits: SandboxLimits | None = None) -> SqlSandbox:
        """Open a DuckDB database file read-only and locked.

        The file stays open (holding DuckDB's read lock) until `close`, because opening it
        per query costs ~30 ms against ~1 ms for a cursor and the checks. DuckDB allows one configuration
        per file per process, so share one sandbox per warehouse.
        """
        limits = limits or SandboxLimits()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"warehouse database not found: {path}")
        try:
            connection = duckdb.connect(str(path), read_only=True, config=_resource_config(limits))
        except duckdb.ConnectionException as error:
            raise RuntimeError(
                f"cannot open {path} read-only for the SQL sandbox: {error}. DuckDB allows one "
                "configuration per database file per process: close read-write connections to "
                "it and share one SqlSandbox per file."
            ) from error
        try:
            _lock_down(connection, limits)
        except BaseException:
            connection.close()
            raise
        return cls(connection, limits, read_only=True)

    @classmethod
    def in_memory(
        cls,
        setup: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
        *,
        tables: Mapping[str, Any] | None = None,
        limits: SandboxLimits | None = None,
    ) -> SqlSandbox:
        """Build an in-memory database, fill it with full access, then lock it down.

        Args:
            setup: called with an unrestricted connection before the lockdown, e.g. to create
                tables from newline-delimited JSON files.
            tables: pandas DataFrames (or anything DuckDB scans) copied into tables of those
                names, after `setup`.
            limits: resource limits; the defaults suit answer extraction too.
        """
        limits = limits or SandboxLimits()
        connection = duckdb.connect(":memory:", config=_resource_config(limits))
        try:
            if setup is not None:
                setup(connection)
            for name, frame in (tables or {}).items():
                connection.register("__sandbox_source", frame)
                connection.execute(
                    f"CREATE TABLE {_quote_identifier(name)} AS SELECT * FROM __sandbox_source"
                )
                connection.unregister("__sandbox_source")
            _lock_down(connection, limits)
        except BaseException:
            connection.close()
            raise
        return cls(connection, limits)

    def execute(self, sql: str) -> QueryResult:
        """Run one read-only statement and fetch at most `limits.store_max_rows` rows.

        Raises:
            ForbiddenStatement: not exactly one read statement, or it reached for files/URLs.
            QueryTimeout: interrupted after `limits.timeout_s`.
            QueryFailed: DuckDB's error (syntax, binder, out of memory), for the model to fix.
        """
        statement = require_reading_statement(sql)
        cursor = self._cursor()
        timed_out, finished = threading.Event(), threading.Event()
        guard = threading.Lock()

        def interrupt() -> None:
            with guard:  # never interrupt a cursor that is being closed
                if not finished.is_set():
                    timed_out.set()
                    cursor.interrupt()

        timer: Deadline | None = None
        started = time.perf_counter()
        caps = self.limits.fetch_caps()
        try:
            # Rolled back below: undoes writes that get past the statement check, such as a
            # DELETE ... RETURNING inside a CTE, which DuckDB reports as a SELECT (a
            # read-only file refuses them itself).
            if self._rolls_back:
                cursor.execute("BEGIN TRANSACTION")
            timer = call_after(self.limits.timeout_s, interrupt)
            # A relation streams its result in batches (`execute` + `fetchmany` materialises
            # it whole first), so rows past the caps are never produced.
            relation = cursor.sql(statement)
            columns, column_types = relation.columns, [str(t) for t in relation.types]
            bounded = bounded_relation(relation, CellBounds(caps.max_cell_bytes, caps.max_bytes))
            fetched = fetch_capped(
                bounded or relation,
                caps,
                self._converter.cursor(),
                server_cells=bounded is not None,
            )
        except QueryTimeout:  # the deadline passed while rows were fetched
            raise QueryTimeout.after(self.limits.timeout_s, sql=sql) from None
        except (duckdb.Error, OSError, pa.ArrowException) as error:
            # An interrupt while Arrow batches stream surfaces as an Arrow/OS error.
            if not isinstance(error, duckdb.Error) and not timed_out.is_set():
                raise
            raise self._translate(error, sql, timed_out.is_set()) from None
        finally:
            if timer is not None:
                timer.cancel()
            with guard:
                finished.set()
            _discard(cursor, rollback=self._rolls_back)
        duration_ms = (time.perf_counter() - started) * 1000
        return QueryResult(
            sql=sql,
            columns=list(columns),
            column_types=column_types,
            rows=fetched.rows,
            row_count=len(fetched.rows),
            truncated=fetched.truncated,
            duration_ms=round(duration_ms, 3),
            note=fetched.note(caps),
        )

    def render(self, result: QueryResult) -> str:
        """What goes back to the model: `result.to_text` capped at this sandbox's limits."""
        return self.limits.render(result)

    def close(self) -> None:
        """Release the database (and its file lock); queries still running are cut off."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
                self._converter.close()

    def __enter__(self) -> SqlSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._connection is None:
                raise RuntimeError("the SQL sandbox is closed")
            return self._connection.cursor()

    def _translate(self, error: duckdb.Error, sql: str, timed_out: bool) -> SandboxError:
        message = truncate(str(error).strip(), MAX_ENGINE_MESSAGE)
        if timed_out or isinstance(error, duckdb.InterruptException):
            return QueryTimeout.after(self.limits.timeout_s, sql=sql)
        if isinstance(error, duckdb.PermissionException):
            return ForbiddenStatement(
                f"{message}\nReading or writing files, URLs and extensions is not allowed. "
                "Query the tables in the database instead (SHOW TABLES lists them).",
                sql=sql,
            )
        if isinstance(error, duckdb.OutOfMemoryException):
            # DuckDB's own advice (set temp_directory) is something the model cannot do.
            return QueryFailed(
                f"Out of Memory Error: the query needed more than the sandbox's "
                f"{self.limits.memory_limit}. Hold less at once: filter early, aggregate before "
                "joining, avoid sorting huge results, or add LIMIT.",
                sql=sql,
                error_type=type(error).__name__,
            )
        return QueryFailed(message, sql=sql, error_type=type(error).__name__)


# --- engine configuration ----------------------------------------------------------------


def _resource_config(limits: SandboxLimits) -> dict[str, Any]:
    config: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "memory_limit": limits.memory_limit,
        # An empty temp_directory turns spilling off; the default would spill next to the
        # database file (or into the working directory for an in-memory database).
        "temp_directory": str(limits.spill_directory) if limits.spill_directory else "",
        "max_temp_directory_size": limits.max_spill_size,
    }
    if limits.threads is not None:
        config["threads"] = limits.threads
    return config


_LOCKING_DOWN = threading.Lock()


def _lock_down(connection: duckdb.DuckDBPyConnection, limits: SandboxLimits) -> None:
    """Apply every limit with SET, in order, the configuration lock last.

    SET rather than connect config: DuckDB applies connect config in an order of its own, and
    `temp_directory` then fails once `enable_external_access` is off. Re-applying the resource
    limits also undoes whatever an in-memory `setup` changed.
    """
    # One sandbox at a time checks and locks: two threads opening the same file share its
    # database instance, and the second must not SET while the first is locking it.
    with _LOCKING_DOWN:
        locked, external = connection.execute(
            "SELECT current_setting('lock_configuration'), "
            "current_setting('enable_external_access')"
        ).fetchone()
        if locked and not external:
            return  # a database instance shared with another sandbox on the same file
        settings = {
            **_resource_config(limits),
            # Python replacement scans would let a query read any DataFrame variable in scope.
            "python_enable_replacements": False,
            "enable_external_access": False,
            "lock_configuration": True,
        }
        for name, value in settings.items():
            connection.execute(f"SET {name} = {_sql_literal(value)}")


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _discard(cursor: duckdb.DuckDBPyConnection, *, rollback: bool) -> None:
    # Closing rolls back too, and a late interrupt may hit the ROLLBACK itself.
    if rollback:
        with contextlib.suppress(duckdb.Error):
            cursor.execute("ROLLBACK")
    cursor.close()

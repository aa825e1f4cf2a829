"""The SQL sandbox on an engine's sessions (PostgreSQL, MySQL/MariaDB, one a package adds): one read-only statement at a time.

The defences, from the server inward: the connecting role may only read (checked when a
session opens, `warehouses`); the statement is read as the server reads it by the engine's
own rules (`Engine.reading_statement`) and must be one read calling only allowed functions
(`_postgres_statements`: PostgreSQL's own parser and the server's own volatility marks;
`_mysql_statements`: MySQL's lexing rules, sqlglot and an allowlist); an engine that gives
no rules is refused, never read by another engine's; it runs in a read-only transaction that is always rolled back; the server stops it
at the time limit (`statement_timeout`, `max_statement_time` / `max_execution_time`), with a
cancellation from here as a backstop; and every call has a deadline of its own, so a server
that stops answering (a frozen process, a lost host) costs the run, never the command.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import duckdb

from eval_pipeline.sandbox._result_fetch import fetch_capped_batches
from eval_pipeline.sandbox._sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.sandbox._sandbox_errors import (
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
    QueryTimeout,
    WarehouseUnavailable,
)
from eval_pipeline.sandbox._sql_result import QueryResult
from eval_pipeline.suite import DatabaseConfig, Engine, engine_named
from eval_pipeline.warehouses import (
    CellBounds,
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    TableSchema,
    WarehouseConnection,
    connect,
    describe_tables,
)

__all__ = ["DEADLINE_GRACE_S", "ServerSandbox", "open_sandbox", "statement_rules"]

#: Seconds past the time limit before the sandbox cancels a statement the server did not stop.
CANCEL_GRACE_S = 1.0
#: Seconds past the time limit after which a call that got no answer is given up: its session
#: is abandoned (never reused) and the call is a `WarehouseUnavailable` error.
DEADLINE_GRACE_S = 5.0

_WRITE = READ_ONLY_ADVICE
_READ_ONLY_ERRORS = ("read-only transaction", "READ ONLY transaction", "(1792)")
_T = TypeVar("_T")


def statement_rules(database: DatabaseConfig) -> Engine:
    """The database's engine, once it gives the sandbox rules to read statements by.

    Raises:
        ConnectionFailed: the engine gives none (`Engine.reading_statement` is None): nothing
            may run on it, since no other engine's rules read its SQL as its server does.
    """
    engine = engine_named(database.type)
    if engine.reading_statement is None and engine.own_sandbox is None:
        raise ConnectionFailed(
            f"database {database.name!r} ({database.type}): the {engine.label} engine gives "
            "the SQL sandbox no statement rules (its Engine.reading_statement is None), so no "
            "SQL is run on it; give the engine rules that read a statement as its server does "
            "(docs/extending.md)"
        )
    return engine


def open_sandbox(database: DatabaseConfig, limits: SandboxLimits) -> SqlSandbox | ServerSandbox:
    """The sandbox of `database`: its engine's own (DuckDB's), or the server sandbox over
    the engine's sessions and statement rules.

    Raises:
        ConnectionFailed: the database cannot be used (`warehouses.connect`), or its engine
            gives the sandbox no statement rules.
    """
    engine = statement_rules(database)
    if engine.own_sandbox is not None:
        return engine.own_sandbox(database, limits)
    return ServerSandbox(database, limits)


class ServerSandbox:
    """Runs one read-only statement per call on a database of an engine with statement rules
    (PostgreSQL, MySQL/MariaDB, one a package adds).

    Same contract as `SqlSandbox` (`execute` → `QueryResult`, `render`, `close`), so the
    built-in agent and the reference runner use either. Thread-safe: each call borrows a
    session of its own from a small pool; sessions are opened as calls need them.
    """

    def __init__(self, database: DatabaseConfig, limits: SandboxLimits | None = None) -> None:
        """Open one session now, so a wrong password or unreachable server shows at once.

        Raises:
            ConnectionFailed: the database cannot be used (see `warehouses.connect`), or its
                engine gives no statement rules (`statement_rules`).
        """
        self.engine = statement_rules(database)
        if self.engine.reading_statement is None:  # its rules live in a sandbox of its own
            raise ConnectionFailed(
                f"database {database.name!r} ({database.type}): the {self.engine.label} engine "
                "runs in a sandbox of its own; open it with open_sandbox"
            )
        self.database = database
        self.limits = limits or SandboxLimits()
        first = connect(database)
        self._idle: list[WarehouseConnection] = [first]
        self.dialect = self.engine.dialect
        self._stable = first.stable
        self._lock = threading.Lock()
        self._closed = False
        # Turns kept Arrow batches into Python values exactly as the DuckDB sandbox does.
        self._converter = duckdb.connect(":memory:")

    def execute(self, sql: str) -> QueryResult:
        """Run one read-only statement and keep at most `limits.store_max_rows` rows.

        Raises:
            ForbiddenStatement: not one read statement, or it reached for files/programs.
            QueryTimeout: stopped on the server after `limits.timeout_s`.
            QueryFailed: the server's error (syntax, unknown table), for the model to fix.
            WarehouseUnavailable: the server went away, or gave no answer within the time
                limit plus `DEADLINE_GRACE_S`.
        """
        text = self.engine.reading_statement(sql, self._stable)
        return self._within_deadline(lambda connection: self._run(connection, sql, text))

    def _run(self, connection: WarehouseConnection, sql: str, text: str) -> QueryResult:
        timed_out = threading.Event()

        def cancel() -> None:
            timed_out.set()
            connection.cancel()

        backstop = threading.Timer(self.limits.timeout_s + CANCEL_GRACE_S, cancel)
        backstop.daemon = True
        started = time.perf_counter()
        caps = self.limits.fetch_caps()
        try:
            backstop.start()
            stream = connection.stream(text, CellBounds(caps.max_cell_bytes, caps.max_bytes))
            fetched = fetch_capped_batches(
                stream.batches,
                caps,
                self._converter.cursor(),
                server_cells=stream.server_cells,
            )
            if stream.refused_row:
                fetched.rows_cut_at_budget()
        except ConnectionFailed as error:
            raise WarehouseUnavailable(error.message) from None
        except (StatementTimeout, QueryTimeout):  # on the server, or while rows were fetched
            raise QueryTimeout.after(self.limits.timeout_s, sql=sql) from None
        except StatementFailed as error:
            if timed_out.is_set():
                raise QueryTimeout.after(self.limits.timeout_s, sql=sql) from None
            if any(marker in error.message for marker in _READ_ONLY_ERRORS):
                raise ForbiddenStatement(f"{error.message}\n{_WRITE}", sql=sql) from None
            raise QueryFailed(error.message, sql=sql, error_type="StatementFailed") from None
        finally:
            backstop.cancel()
            connection.end()  # rolls back; a cut-off result is cancelled on the server
        return QueryResult(
            sql=sql,
            columns=list(stream.columns),
            column_types=stream.column_types,
            rows=fetched.rows,
            row_count=len(fetched.rows),
            truncated=fetched.truncated,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            note=fetched.note(caps),
        )

    def _within_deadline(self, work: Callable[[WarehouseConnection], _T]) -> _T:
        """`work` on a borrowed session in a fresh read-only transaction, in a thread of its
        own, waited for at most the time limit plus `DEADLINE_GRACE_S`.

        A server that stops answering (a stopped process, a host gone without a word) would
        hold the calling thread, and with it the command, for as long as it is silent. Past
        the deadline the session is abandoned instead: its thread, a daemon, is left to
        fail on its own and closes the session if it ever gets an answer.
        """
        outcome: dict[str, object] = {}
        done = threading.Event()
        guard = threading.Lock()

        def worker() -> None:
            connection: WarehouseConnection | None = None
            try:
                connection = self._ready(self._borrow())
                outcome["value"] = work(connection)
            except ConnectionFailed as error:
                outcome["error"] = WarehouseUnavailable(error.message)
            except BaseException as error:  # handed to the caller below
                outcome["error"] = error
            finally:
                with guard:
                    abandoned = outcome.get("abandoned", False)
                    done.set()
                if connection is not None:
                    if abandoned:
                        connection.broken = True
                    self._give_back(connection)

        threading.Thread(target=worker, name="sql-sandbox", daemon=True).start()
        deadline_s = self.limits.timeout_s + DEADLINE_GRACE_S
        done.wait(deadline_s)
        with guard:
            if not done.is_set():
                outcome["abandoned"] = True
        if outcome.get("abandoned"):
            raise WarehouseUnavailable(
                f"database {self.database.name!r} ({self.database.type}): no answer from the "
                f"server within {deadline_s:g} s (the query time limit plus "
                f"{DEADLINE_GRACE_S:g} s); the session was abandoned. Check that the server "
                "is up and not overloaded."
            )
        if "error" in outcome:
            raise outcome["error"]  # type: ignore[misc]
        return outcome["value"]  # type: ignore[return-value]

    @property
    def engine_name(self) -> str:
        """The engine as the model is told it, e.g. "PostgreSQL"."""
        return self.engine.label

    def tables(self) -> list[TableSchema]:
        """The tables of the database's schema, with comments, from the server's catalogue."""
        return self._within_deadline(describe_tables)

    def render(self, result: QueryResult) -> str:
        """What goes back to the model: `result.to_text` capped at this sandbox's limits."""
        return self.limits.render(result)

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for connection in idle:
            with contextlib.suppress(Exception):
                connection.close()
        self._converter.close()

    def __enter__(self) -> ServerSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _borrow(self) -> WarehouseConnection:
        with self._lock:
            if self._closed:
                raise RuntimeError("the SQL sandbox is closed")
            if self._idle:
                return self._idle.pop()
        try:
            return connect(self.database)
        except ConnectionFailed as error:
            raise WarehouseUnavailable(error.message) from None

    def _ready(self, connection: WarehouseConnection) -> WarehouseConnection:
        """`connection` in a fresh read-only transaction; a pooled session the server has
        dropped since (a restart, an idle timeout) is replaced by a new one, once."""
        try:
            connection.begin_read_only(self.limits.timeout_s)
            return connection
        except ConnectionFailed:
            connection.broken = True  # never back into the pool
            connection.close()
        fresh = connect(self.database)
        fresh.begin_read_only(self.limits.timeout_s)
        return fresh

    def _give_back(self, connection: WarehouseConnection) -> None:
        with self._lock:
            if not self._closed and not connection.broken:
                self._idle.append(connection)
                return
        with contextlib.suppress(Exception):
            connection.close()

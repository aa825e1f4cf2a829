"""The SQL sandbox on a server warehouse (PostgreSQL, MySQL/MariaDB): one read-only statement at a time.

The defences, each enough for a different attack: the statement is parsed with sqlglot in
the engine's dialect and must be one read (no writes, no SELECT INTO, no locks, no
server-side file or program access); it runs in a read-only transaction that is always
rolled back; the server stops it at the time limit (`statement_timeout`,
`max_statement_time` / `max_execution_time`), with a cancellation from here as a
backstop. A read-only database role is still the recommended setup (docs/warehouses.md):
the sandbox cannot know every function a server offers.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from eval_pipeline.agents._errors import AgentError
from eval_pipeline.agents._result_fetch import FetchTimeout, fetch_capped_batches
from eval_pipeline.agents._sandbox import SandboxLimits
from eval_pipeline.agents._sandbox_errors import ForbiddenStatement, QueryFailed, QueryTimeout
from eval_pipeline.agents._sql_result import QueryResult
from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses import (
    ENGINE_NAMES,
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    TableSchema,
    WarehouseConnection,
    connect,
    describe_tables,
)

__all__ = ["ServerSandbox", "WarehouseUnavailable", "check_server_statement"]

#: Seconds past the time limit before the sandbox cancels a statement the server did not stop.
CANCEL_GRACE_S = 1.0

_ALLOWED = (
    "Each call runs exactly one read-only query: SELECT (also WITH ... SELECT), VALUES, SHOW, "
    "DESCRIBE or EXPLAIN of a SELECT."
)
_WRITE = "The database is read-only. Compute what you need in a SELECT (WITH for steps)."
_FILES = (
    "Reading or writing files and running programs on the server is not allowed. "
    "Query the tables instead; the query's result comes back to you."
)
#: Functions that reach the server's files, programs, other sessions or settings. Matched
#: by prefix, lower case, whatever the schema qualifier.
_FORBIDDEN_FUNCTIONS = {
    "postgres": (
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_",
        "pg_stat_file",
        "pg_file_",
        "pg_logdir_ls",
        "lo_",
        "loread",
        "lowrite",
        "dblink",
        "set_config",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_promote",
        "pg_switch_wal",
        "pg_create_",
        "pg_drop_",
        "pg_replication_",
        "pg_advisory",
        "pg_try_advisory",
        "pg_notify",
        "query_to_xml",
        "cursor_to_xml",
        "pg_import_system_collations",
    ),
    "mysql": ("load_file", "sys_exec", "sys_eval", "get_lock", "release_", "master_pos_wait"),
}
#: MySQL words that read or write server files (sqlglot cannot parse INTO OUTFILE at all).
_FILE_WORDS = frozenset({"OUTFILE", "DUMPFILE", "INFILE", "LOAD_FILE"})
#: `/*! ... */` and MariaDB's `/*M! ... */`: executed by the server, a comment to any parser.
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!")
_READS = (exp.Query, exp.Values, exp.Describe, exp.Show)
_WRITES = (exp.DML, exp.Create, exp.Drop, exp.Alter, exp.Copy, exp.Command, exp.Set)
_READ_ONLY_ERRORS = ("read-only transaction", "READ ONLY transaction", "(1792)")


def check_server_statement(sql: str, dialect: str) -> exp.Expression:
    """The one read statement in `sql` as sqlglot parses it in `dialect`, or ForbiddenStatement."""
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except TokenError as error:
        raise QueryFailed(f"The query could not be read: {error}", sql=sql) from None
    if dialect == "mysql" and _EXECUTABLE_COMMENT.search(sql):
        raise ForbiddenStatement(
            "Comments of the form /*! ... */ are not allowed: MySQL and MariaDB run their "
            f"content as SQL. Write the query without them. {_ALLOWED}",
            sql=sql,
        )
    words = {t.text.upper() for t in tokens if t.token_type.name not in ("STRING", "IDENTIFIER")}
    if words & _FILE_WORDS:
        raise ForbiddenStatement(f"{_FILES} {_ALLOWED}", sql=sql)
    if dialect == "postgres" and tokens and tokens[0].text.upper() == "SHOW":
        return exp.Command(this="SHOW")  # sqlglot reads PostgreSQL's SHOW as a raw command
    if dialect == "postgres" and (explained := _explained(sql, tokens)) is not None:
        # sqlglot reads PostgreSQL's EXPLAIN as a raw command: check what it explains. EXPLAIN
        # ANALYZE runs that statement, so it must pass every check a query passes, as a read.
        inner = check_server_statement(explained, dialect) if explained.strip() else None
        if not isinstance(inner, exp.Query | exp.Values):
            raise ForbiddenStatement(f"EXPLAIN must be followed by one SELECT. {_ALLOWED}", sql=sql)
        return exp.Describe(this=inner)
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as error:
        first = error.errors[0]["description"] if error.errors else str(error)
        raise QueryFailed(
            f"The query could not be parsed as {dialect} SQL ({first}). Check the syntax, "
            f"or write it more simply. {_ALLOWED}",
            sql=sql,
        ) from None
    if not statements:
        raise ForbiddenStatement(f"The query is empty. {_ALLOWED}", sql=sql)
    if len(statements) > 1:
        raise ForbiddenStatement(
            f"Send one SQL statement per call; this query has {len(statements)}. Run them one "
            f"at a time, or combine them with WITH. {_ALLOWED}",
            sql=sql,
        )
    statement = statements[0]
    if not isinstance(statement, _READS):
        word = tokens[0].text.upper() if tokens else type(statement).__name__.upper()
        advice = _FILES if isinstance(statement, exp.Copy) else _WRITE
        raise ForbiddenStatement(f"{word} is not allowed here. {advice} {_ALLOWED}", sql=sql)
    _require_read_only(statement, sql, dialect)
    return statement


def _explained(sql: str, tokens: list) -> str | None:
    """What PostgreSQL's `EXPLAIN [ANALYZE] [VERBOSE]` or `EXPLAIN (options)` applies to (the
    rest of `sql`), or None when `sql` is no EXPLAIN."""
    if not tokens or tokens[0].text.upper() != "EXPLAIN":
        return None
    # The tokenizer keeps everything after EXPLAIN as one raw string: read that part again.
    sql = sql[tokens[0].end + 1 :]
    tokens = sqlglot.tokenize(sql, read="postgres")
    i = 0
    if i < len(tokens) and tokens[i].token_type is TokenType.L_PAREN:
        depth = 0
        while i < len(tokens):
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[i].token_type, 0)
            i += 1
            if depth == 0:
                break
    else:
        while i < len(tokens) and tokens[i].text.upper() in ("ANALYZE", "ANALYSE", "VERBOSE"):
            i += 1
    return sql[tokens[i].start :] if i < len(tokens) else ""


def _require_read_only(statement: exp.Expression, sql: str, dialect: str) -> None:
    forbidden = _FORBIDDEN_FUNCTIONS.get(dialect, ())
    for node in statement.walk():
        if isinstance(node, _WRITES):
            raise ForbiddenStatement(
                f"{node.key.upper()} inside a query is not allowed. {_WRITE}", sql=sql
            )
        if isinstance(node, exp.Into):
            raise ForbiddenStatement(
                f"SELECT ... INTO is not allowed: nothing can be stored. {_WRITE}", sql=sql
            )
        if isinstance(node, exp.Lock):
            raise ForbiddenStatement(
                "Locking clauses (FOR UPDATE/SHARE) are not allowed; drop them.", sql=sql
            )
        if isinstance(node, exp.Func):
            name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if name.startswith(forbidden):
                raise ForbiddenStatement(f"The function {name} is not allowed. {_FILES}", sql=sql)


class WarehouseUnavailable(AgentError):
    """The server went away or refused a new session: the run is an `error` run, not a wrong answer."""


class ServerSandbox:
    """Runs one read-only statement per call on a PostgreSQL or MySQL/MariaDB database.

    Same contract as `SqlSandbox` (`execute` → `QueryResult`, `render`, `close`), so the
    built-in agent and the reference runner use either. Thread-safe: each call borrows a
    session of its own from a small pool; sessions are opened as calls need them.
    """

    def __init__(self, database: DatabaseConfig, limits: SandboxLimits | None = None) -> None:
        """Open one session now, so a wrong password or unreachable server shows at once.

        Raises:
            ConnectionFailed: the database cannot be used (see `warehouses.connect`).
        """
        self.database = database
        self.limits = limits or SandboxLimits()
        self._idle: list[WarehouseConnection] = [connect(database)]
        self.dialect = self._idle[0].dialect
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
        """
        check_server_statement(sql, self.dialect)
        connection = self._borrow()
        timed_out = threading.Event()

        def cancel() -> None:
            timed_out.set()
            connection.cancel()

        backstop = threading.Timer(self.limits.timeout_s + CANCEL_GRACE_S, cancel)
        backstop.daemon = True
        started = time.perf_counter()
        caps = self.limits.fetch_caps()
        try:
            connection = self._ready(connection)
            backstop.start()
            stream = connection.stream(sql)
            fetched = fetch_capped_batches(stream.batches, caps, self._converter.cursor())
        except ConnectionFailed as error:
            raise WarehouseUnavailable(error.message) from None
        except (StatementTimeout, FetchTimeout):
            raise self._timeout(sql) from None
        except StatementFailed as error:
            if timed_out.is_set():
                raise self._timeout(sql) from None
            if any(marker in error.message for marker in _READ_ONLY_ERRORS):
                raise ForbiddenStatement(f"{error.message}\n{_WRITE}", sql=sql) from None
            raise QueryFailed(error.message, sql=sql, error_type="StatementFailed") from None
        finally:
            backstop.cancel()
            connection.end()  # rolls back; a cut-off result is cancelled on the server
            self._give_back(connection)
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

    @property
    def engine_name(self) -> str:
        """The engine as the model is told it, e.g. "PostgreSQL"."""
        return ENGINE_NAMES[self.dialect]

    def tables(self) -> list[TableSchema]:
        """The tables of the database's schema, with comments, from the server's catalogue."""
        connection = self._borrow()
        try:
            return describe_tables(connection)
        finally:
            self._give_back(connection)

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
        connection.close()

    def _timeout(self, sql: str) -> QueryTimeout:
        return QueryTimeout(
            f"The query was stopped after {self.limits.timeout_s:g} s, the time limit. Make "
            "it cheaper: filter early, aggregate before joining, avoid cross joins.",
            sql=sql,
        )

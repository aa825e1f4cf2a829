"""What a sandbox query can end in short of a result: a `SandboxError` the model reads, or `WarehouseUnavailable`."""

from __future__ import annotations

#: The most of an engine's own error message the model reads.
MAX_ENGINE_MESSAGE = 1_000
#: Advice the model reads with a refused write, on every engine.
READ_ONLY_ADVICE = "The database is read-only. Compute what you need in a SELECT (WITH for steps)."
#: What the model reads when a query would store its rows or lock them (every engine's check).
NO_INTO = f"SELECT ... INTO is not allowed: nothing can be stored. {READ_ONLY_ADVICE}"
NO_LOCKS = "Locking clauses (FOR UPDATE/SHARE) are not allowed; drop them."
#: Advice the model reads with a refused reach for the server's files or programs.
NO_FILES_ADVICE = (
    "Reading or writing files and running programs on the server is not allowed. "
    "Query the tables instead; the query's result comes back to you."
)


class SandboxError(Exception):
    """A query the sandbox did not run to completion; `str(error)` is written for the model."""

    def __init__(self, message: str, *, sql: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.sql = sql


class ForbiddenStatement(SandboxError):
    """The query is not one read-only statement, or it tried to reach files, URLs or extensions."""


class QueryTimeout(SandboxError):
    """The query ran past the time limit: the engine or the server stopped it, or its rows
    were still being fetched at the deadline."""

    @classmethod
    def after(cls, timeout_s: float, *, sql: str = "") -> QueryTimeout:
        """The error of a query stopped at `timeout_s`, with the advice the model reads."""
        return cls(
            f"The query was stopped after {timeout_s:g} s, the time limit. Make it cheaper: "
            "filter early, aggregate before joining, avoid cross joins.",
            sql=sql,
        )


class QueryFailed(SandboxError):
    """DuckDB rejected or failed the query (syntax, unknown table, out of memory, ...)."""

    def __init__(self, message: str, *, sql: str = "", error_type: str = "") -> None:
        super().__init__(message, sql=sql)
        self.error_type = error_type


class WarehouseUnavailable(Exception):
    """The server went away or refused a new session: the run is an `error` run, not a wrong answer.

    Not a `SandboxError`: the model cannot act on it, so it never goes back to the model as a
    tool error; whoever runs the sandbox (the agent runner, the reference run) reports it.
    """


def require_one_statement(count: int, sql: str, allowed: str) -> None:
    """Refuse an empty `sql`, or one of several statements, saying what `allowed` is."""
    if count == 0:
        raise ForbiddenStatement(f"The query is empty. {allowed}", sql=sql)
    if count > 1:
        raise ForbiddenStatement(
            f"Send one SQL statement per call; this query has {count}. Run them one at a "
            f"time, or combine them with WITH. {allowed}",
            sql=sql,
        )

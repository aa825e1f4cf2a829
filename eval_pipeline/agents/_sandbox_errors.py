"""What a sandbox query can end in short of a result: each message is written for the model."""

from __future__ import annotations


class SandboxError(Exception):
    """A query the sandbox did not run to completion; `str(error)` is written for the model."""

    def __init__(self, message: str, *, sql: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.sql = sql


class ForbiddenStatement(SandboxError):
    """The query is not one read-only statement, or it tried to reach files, URLs or extensions."""


class QueryTimeout(SandboxError):
    """The query ran past the time limit and was interrupted."""


class QueryFailed(SandboxError):
    """DuckDB rejected or failed the query (syntax, unknown table, out of memory, ...)."""

    def __init__(self, message: str, *, sql: str = "", error_type: str = "") -> None:
        super().__init__(message, sql=sql)
        self.error_type = error_type


def trim_message(error: BaseException, limit: int = 1_000) -> str:
    message = str(error).strip()
    return message if len(message) <= limit else message[: limit - 1] + "…"

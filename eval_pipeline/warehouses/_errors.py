"""What can go wrong talking to a warehouse, told apart: cannot connect, too slow, the SQL failed."""

from __future__ import annotations

from eval_pipeline.suite import redact, truncate


class WarehouseError(Exception):
    """A warehouse operation failed; the message names the database and never holds a password."""

    def __init__(self, message: str) -> None:
        self.message = redact(message)
        super().__init__(self.message)


class ConnectionFailed(WarehouseError):
    """The server is unreachable, refused the login, or lacks the configured schema."""


class StatementTimeout(WarehouseError):
    """The statement ran past its time limit and was stopped on the server.

    The driver's word for it, below the sandbox: `ServerSandbox` reports it as its
    `QueryTimeout`, the one timeout the model and the user read.
    """


class StatementFailed(WarehouseError):
    """The server rejected or failed the statement (syntax, unknown table, read-only, ...)."""


def short_cause(error: BaseException, limit: int = 600) -> str:
    """A driver's error message without its driver prefixes, redacted and cut to `limit`."""
    text = str(error).strip()
    for prefix in ("IO: ", "INVALID_STATE: ", "CANCELLED: ", "INVALID_ARGUMENT: ", "UNKNOWN: "):
        text = text.removeprefix(prefix)
    for noise in ("[libpq] Failed to connect: ", "[libpq] "):
        text = text.replace(noise, "")
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return truncate(redact(text), limit)

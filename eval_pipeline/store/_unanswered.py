"""A bucket store that stops answering: its requests' bounds, one error that names the store, and no second wait."""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: Every request to the bucket has a deadline: a silent endpoint fails the connect after
#: BUCKET_CONNECT_TIMEOUT_S, a stalled answer after BUCKET_READ_TIMEOUT_S, and botocore tries
#: a request at most BUCKET_ATTEMPTS times (s3fs's own retry loop is cut to the same), so a
#: store that stops answering ends the command instead of holding it.
BUCKET_CONNECT_TIMEOUT_S = 5
BUCKET_READ_TIMEOUT_S = 20
BUCKET_ATTEMPTS = 2

#: Once a request to a bucket's endpoint got no answer, every request to it (ours through
#: s3fs, DuckDB's through Arrow) fails at once for as long as one request may wait: the
#: command is ending, and each of its other steps (another model's partition, a cleanup, the
#: published copy, a check whether a file is damaged) would otherwise wait as long again. A
#: process that lives on (the UI) tries the bucket again after that.
SILENT_FOR_S = BUCKET_ATTEMPTS * (BUCKET_CONNECT_TIMEOUT_S + BUCKET_READ_TIMEOUT_S)

#: endpoint URL (None: AWS's own) → when it last did not answer, and what says so
_silent: dict[str | None, tuple[float, str]] = {}
_silent_lock = threading.Lock()

#: How Arrow's S3 filesystem (DuckDB's reads of a bucket store) says that a request got no
#: answer: the AWS SDK's error type, in its message (DuckDB passes on the message alone).
_ARROW_UNANSWERED = "AWS Error NETWORK_CONNECTION"


class StoreUnavailable(OSError):
    """The bucket store did not answer a request within its timeouts and attempts."""


def _endpoint(location: Any) -> str | None:
    return location.storage_options.get("endpoint_url")


def refuse_if_silent(endpoint: str | None) -> None:
    """Raise `StoreUnavailable` at once while the endpoint is known not to answer."""
    with _silent_lock:
        since, said = _silent.get(endpoint, (0.0, ""))
    if said and time.monotonic() - since < SILENT_FOR_S:
        raise StoreUnavailable(errno.ETIMEDOUT, said)


def is_silent(location: Any) -> bool:
    try:
        refuse_if_silent(_endpoint(location))
    except StoreUnavailable:
        return True
    return False


def unavailable(location: Any, error: BaseException | None = None) -> StoreUnavailable:
    """The error saying that the bucket of `location` did not answer, remembered so that
    the next requests to its endpoint fail at once."""
    return _record(_endpoint(location), location.path.split("/", 1)[0])


def _record(endpoint: str | None, bucket: str | None) -> StoreUnavailable:
    where = f" s3://{bucket}" if bucket else ""
    at = f" at {endpoint}" if endpoint else ""
    said = (
        f"the bucket store{where}{at} stopped answering: no answer after {BUCKET_ATTEMPTS} "
        f"attempts, each given {BUCKET_CONNECT_TIMEOUT_S} s to connect and "
        f"{BUCKET_READ_TIMEOUT_S} s to answer"
    )
    with _silent_lock:
        known = _silent.get(endpoint)
        if known is None or time.monotonic() - known[0] >= SILENT_FOR_S:
            _silent[endpoint] = (time.monotonic(), said)
        else:
            said = known[1]  # the first words stand: a request to another bucket says less
    return StoreUnavailable(errno.ETIMEDOUT, said)


def unanswered(error: BaseException) -> bool:
    """Whether a request's error says that the bucket gave no answer (a timeout, a refused or
    dropped connection), from botocore (s3fs) or from Arrow's S3 filesystem (DuckDB)."""
    from botocore.exceptions import ConnectionError as BotocoreConnectionError
    from botocore.exceptions import HTTPClientError

    if isinstance(error, (BotocoreConnectionError, HTTPClientError, TimeoutError)):
        return True
    return _ARROW_UNANSWERED in str(error)


@contextlib.contextmanager
def answering(location: Any) -> Iterator[None]:
    """A request to the bucket of `location`: refused at once while its endpoint is known not
    to answer, and one that got no answer becomes `StoreUnavailable`, which names the store
    and its bounds (the client's own error names an object's URL: it stays the cause, for
    the log). Other errors, and local paths (a `pathlib.Path`), pass as they are."""
    if not hasattr(location, "storage_options"):
        yield
        return
    refuse_if_silent(_endpoint(location))
    try:
        yield
    except (FileNotFoundError, StoreUnavailable):
        raise
    except Exception as error:
        if not unanswered(error):
            raise
        raise unavailable(location) from error


def watch_client(client: Any, endpoint: str | None) -> None:
    """Have every request of an s3fs client (the store's own reads and writes, UPath's too)
    refused while its endpoint is known not to answer, and its last failed attempt
    remembered: then one silent request costs its timeouts once, not once per call."""

    def before(**_kwargs: Any) -> None:
        refuse_if_silent(endpoint)

    def after(*, attempts: int, caught_exception: BaseException | None = None, **_: Any) -> None:
        last = attempts >= BUCKET_ATTEMPTS
        if last and caught_exception is not None and unanswered(caught_exception):
            _record(endpoint, None)

    client.meta.events.register_first("before-call.s3", before)
    client.meta.events.register_first("needs-retry.s3", after)


def guarded(endpoint: str | None, call: Callable[[], T], path: str) -> T:
    """`call()`, a request of Arrow's S3 filesystem (DuckDB's reads) for `path`, refused while
    the endpoint is known not to answer, and remembered when it got no answer."""
    refuse_if_silent(endpoint)
    try:
        return call()
    except OSError as error:
        if isinstance(error, (FileNotFoundError, StoreUnavailable)) or not unanswered(error):
            raise
        raise _record(endpoint, path.lstrip("/").split("/", 1)[0]) from error

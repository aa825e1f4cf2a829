"""The one retry policy for every HTTP call: what is retried, how long to wait, and what is raised after."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from json import dumps as json_dumps
from typing import Any

import httpx

from eval_pipeline.agents._errors import (
    AuthenticationFailed,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RequestRejected,
    ResponseTooLarge,
    scrub,
)
from eval_pipeline.agents._pacing import estimated_tokens
from eval_pipeline.agents._transport import DEFAULT_REPLY_LIMITS, LimitedClient, ReplyLimits
from eval_pipeline.suite import PUBLIC_HEADERS

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "RetryPolicy",
    "parse_retry_after",
    "secret_header_values",
    "send_with_retry",
]

logger = logging.getLogger("eval_pipeline.agents")

# An error body is only read for its message; the rest of a huge one is never downloaded.
_ERROR_BODY_BYTES = 65_536


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to retry a failed HTTP call; the same policy serves every endpoint.

    Retried: the statuses in `retry_statuses`, every 5xx, connection errors and timeouts.
    Never retried: 401/403 and other 4xx, which another try cannot fix.

    Args:
        max_attempts: attempts in all, the first one included.
        base_delay_s: the backoff ceiling after the first failure; it doubles per failure.
        max_delay_s: cap on any single wait, `Retry-After` included, so a run stays bounded.
        retry_statuses: non-5xx statuses worth retrying: 408 (request timeout), 409 (conflict,
            sent by some providers for transient lock contention) and 429 (rate limited).
        jitter: returns a float in [0, 1); "full jitter" spreads concurrent retries so they
            do not hit a recovering provider at the same instant. Injectable for tests.
        sleep: the awaitable sleep used between attempts. Injectable so tests need not wait.
        rate_limit_patience_s: how long one request may keep being answered 429 by an
            endpoint whose pace is kept (`Pace`) before it fails; those answers count against
            no attempt, since the endpoint's limit is a pace to keep, not a fault.
    """

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    rate_limit_patience_s: float = 900.0
    retry_statuses: frozenset[int] = frozenset({408, 409, 429})
    jitter: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    sleep: Callable[[float], Awaitable[Any]] = field(
        default=asyncio.sleep, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("delays must not be negative")

    def retries_status(self, status_code: int) -> bool:
        """Whether a response with this status is worth another attempt."""
        return status_code in self.retry_statuses or 500 <= status_code <= 599

    def delay_s(self, failed_attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after attempt number `failed_attempt` (1-based) failed.

        Args:
            failed_attempt: the attempt that just failed.
            retry_after_s: what the endpoint asked for (`Retry-After`); it replaces the
                backoff, since the endpoint knows best when it will accept us again, but it
                is still capped by `max_delay_s`.
        """
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (failed_attempt - 1))
        return self.jitter() * ceiling


DEFAULT_RETRY_POLICY = RetryPolicy()


def parse_retry_after(
    headers: Mapping[str, str] | httpx.Headers, *, now: datetime | None = None
) -> float | None:
    """Seconds an endpoint asked us to wait, from `retry-after-ms` or `Retry-After`.

    `Retry-After` is either delay-seconds or an HTTP date (RFC 9110 §10.2.3); OpenAI also
    sends the finer `retry-after-ms`. Unparseable values are ignored (None), not errors.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    milliseconds = lowered.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = None
        if value is not None and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def secret_header_values(headers: httpx.Headers | Mapping[str, str]) -> list[str]:
    """Values of the request headers that may carry credentials (see `PUBLIC_HEADERS`)."""
    return [value for key, value in headers.items() if key.lower() not in PUBLIC_HEADERS]


@dataclass
class _Failure:
    error_type: type[ProviderError]
    problem: str
    status_code: int | None = None
    detail: str | None = None
    retry_after_s: float | None = None
    cause: BaseException | None = None


async def send_with_retry(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    endpoint: str,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    timeout: httpx.Timeout | None = None,
    limits: ReplyLimits | None = None,
) -> httpx.Response:
    """Send one request, retrying per `policy`, and return the first 2xx response.

    Args:
        client: the pooled client; its default headers (credentials) are sent too.
        method: the HTTP method.
        url: the absolute URL.
        endpoint: who is called, for messages and logs (``openai:gpt-4.1``, ``http:my-agent``).
        json: the JSON body.
        headers: extra headers for this request (resolved secrets included; never logged).
        policy: the retry policy.
        timeout: overrides the client's timeout for this request.
        limits: the deadline and body cap of each attempt; None means the client's own
            (`LimitedClient.reply_limits`), else `DEFAULT_REPLY_LIMITS`.

    Returns:
        The response, already read (its body at most `limits.max_bytes`).

    Raises:
        AuthenticationFailed: 401/403, at once.
        RequestRejected: another non-retried status, at once.
        RateLimited: still 429 after the last attempt.
        ProviderUnavailable: still 5xx/409 or a connection failure after the last attempt.
        ProviderTimeout: still timing out (or 408, or past `limits.deadline_s`) after the
            last attempt.
        ResponseTooLarge: the body passed `limits.max_bytes`, at once.
        ProtocolError: the response could not be decoded.
    """
    if limits is None:
        limits = client.reply_limits if isinstance(client, LimitedClient) else DEFAULT_REPLY_LIMITS
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    # A client's direct route skips httpx's per-request work; the body is then encoded as
    # httpx encodes JSON, once for every attempt.
    route = (
        client.route(method, url, headers=headers, timeout=timeout, json_body=json is not None)
        if isinstance(client, LimitedClient)
        else None
    )
    body = None if route is None or json is None else _json_bytes(json)
    pace = client.pace if isinstance(client, LimitedClient) else None
    tokens = estimated_tokens(json, len(body) if body is not None else 0) if pace else 0
    failure: _Failure | None = None
    attempt = sent = 0
    limited_since: float | None = None  # when this request was first answered 429
    while attempt < policy.max_attempts:
        attempt += 1
        sent += 1
        turn = await pace.take_turn(tokens, sleep=policy.sleep) if pace is not None else None
        if route is not None and isinstance(client, LimitedClient):
            request = route.request
            opening = functools.partial(client.send_direct, route, body)
        else:
            request = client.build_request(
                method, _parsed(url), json=json, headers=headers, **extra
            )
            opening = functools.partial(client.send, request, stream=True)
        secrets = secret_header_values(request.headers)
        response = None
        try:
            # httpx's timeouts bound each read; this bounds the whole exchange.
            async with asyncio.timeout(limits.deadline_s):
                response = await _read_capped(opening, limits.max_bytes)
        except TimeoutError as exc:
            failure = _Failure(
                ProviderTimeout,
                f"no response within {limits.deadline_s:g} s (timeout_s, the whole request)",
                cause=exc,
            )
        except _BodyTooLarge as exc:
            failure = _Failure(
                ResponseTooLarge,
                f"the reply passed {exc.limit:,} bytes (limits.response_max_bytes) and was "
                "not read further",
                status_code=exc.status_code,
                cause=exc,
            )
        except httpx.HTTPError as exc:
            failure = _transport_failure(exc, request, secrets)
        else:
            if response.is_success:
                return response
            failure = _status_failure(response, policy, secrets)
        finally:
            if pace is not None and turn is not None:
                if response is None:
                    pace.failed(turn)
                else:
                    pace.answered(turn, response.status_code, response.headers)
        if pace is not None and failure.error_type is RateLimited:
            # A pace to keep: every request to the endpoint waits, and this one's turn comes
            # back, at no attempt's cost until the endpoint has refused it for longer than
            # our patience (then 429s count as any failure does).
            pace.pause(failure.retry_after_s or pace.resume_after() or policy.base_delay_s)
            now = time.monotonic()
            limited_since = now if limited_since is None else limited_since
            if now - limited_since < policy.rate_limit_patience_s:
                attempt -= 1
                continue
        if not failure.error_type.retryable or attempt == policy.max_attempts:
            break
        delay = policy.delay_s(attempt, failure.retry_after_s)
        logger.warning(
            "%s: %s%s; retrying in %.2f s (attempt %d of %d)",
            endpoint,
            failure.problem,
            f" (HTTP {failure.status_code})" if failure.status_code else "",
            delay,
            attempt,
            policy.max_attempts,
        )
        await policy.sleep(delay)
    assert failure is not None
    raise failure.error_type(
        failure.problem,
        endpoint=endpoint,
        url=url,
        method=method,
        status_code=failure.status_code,
        attempts=sent,
        detail=failure.detail,
    ) from failure.cause


#: A URL parsed once: an evaluation sends thousands of requests to the same few endpoints, and
#: httpx builds a request from a parsed URL in half the time it takes from the text.
_parsed = functools.lru_cache(maxsize=256)(httpx.URL)


class _BodyTooLarge(Exception):
    def __init__(self, limit: int, status_code: int) -> None:
        super().__init__(f"body over {limit} bytes")
        self.limit = limit
        self.status_code = status_code


def _json_bytes(value: Any) -> bytes:
    return json_dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


async def _read_capped(
    opening: Callable[[], Awaitable[httpx.Response]], max_bytes: int
) -> httpx.Response:
    """Open the response and read its body, decoded, up to `max_bytes`.

    `aiter_bytes` yields decompressed chunks, so the count is of what would be held in
    memory. A success over the cap raises `_BodyTooLarge`; an error body is cut to its first
    bytes, since only its message is read.
    """
    response = await opening()
    try:
        cap = max_bytes if response.is_success else min(max_bytes, _ERROR_BODY_BYTES)
        parts: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                if response.is_success:
                    raise _BodyTooLarge(max_bytes, response.status_code)
                parts.append(chunk[: len(chunk) - (size - cap)])
                break
            parts.append(chunk)
        # What `Response.aread` does, with the cap: `.content`, `.json()` work as usual.
        response._content = b"".join(parts)
    finally:
        await response.aclose()
    return response


def _transport_failure(
    exc: httpx.HTTPError, request: httpx.Request, secrets: list[str]
) -> _Failure:
    said = scrub(str(exc), secrets).strip()
    detail = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        limits = request.extensions.get("timeout", {})
        phase = {
            httpx.ConnectTimeout: "connect",
            httpx.ReadTimeout: "read",
            httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "pool",
        }.get(type(exc), "read")
        limit = limits.get(phase)
        within = f" within {limit:g} s" if isinstance(limit, int | float) else ""
        return _Failure(ProviderTimeout, f"no response{within}", detail=detail, cause=exc)
    if isinstance(exc, httpx.UnsupportedProtocol):
        return _Failure(RequestRejected, "the URL is not http(s)", detail=detail, cause=exc)
    if isinstance(exc, httpx.LocalProtocolError | httpx.DecodingError):
        return _Failure(ProtocolError, "the exchange broke HTTP", detail=detail, cause=exc)
    if isinstance(exc, httpx.ConnectError):
        return _Failure(ProviderUnavailable, "could not connect", detail=detail, cause=exc)
    return _Failure(
        ProviderUnavailable, "the connection failed before a response", detail=detail, cause=exc
    )


def _status_failure(response: httpx.Response, policy: RetryPolicy, secrets: list[str]) -> _Failure:
    status = response.status_code
    detail = _error_message(response, secrets) or None
    if status in (401, 403):
        return _Failure(AuthenticationFailed, "the credentials were refused", status, detail)
    if not policy.retries_status(status):
        return _Failure(RequestRejected, "the request was rejected", status, detail)
    retry_after = parse_retry_after(response.headers)
    if status == 429 and _quota_used_up(response):
        # OpenAI answers 429 when the account has no credit left: no wait brings it back.
        return _Failure(RequestRejected, "the account's quota is used up", status, detail)
    if status == 429:
        return _Failure(RateLimited, "rate limited", status, detail, retry_after)
    if status == 408:
        return _Failure(ProviderTimeout, "the endpoint timed out", status, detail, retry_after)
    return _Failure(ProviderUnavailable, "the endpoint failed", status, detail, retry_after)


def _quota_used_up(response: httpx.Response) -> bool:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and "insufficient_quota" in (
        error.get("code"),
        error.get("type"),
    )


def _error_message(response: httpx.Response, secrets: list[str]) -> str:
    # OpenAI and Anthropic: {"error": {"message": ...}}; FastAPI: {"detail": ...}.
    try:
        body = response.json()
    except ValueError:
        body = None
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        message = message or body.get("message") or body.get("detail")
    if not isinstance(message, str):
        message = response.text
    # Scrubbed here, before `ProviderError` cuts it: a cut could hide a key from the scrub.
    return scrub(" ".join(message.split()), secrets)

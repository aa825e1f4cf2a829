"""One client's connections split into several small pools, each request sent to the least busy.

httpcore's connection pool looks at every connection it holds on each request and each
response: it polls idle sockets for keep-alive expiry and counts the connections once per
idle connection, so its cost per request grows with the square of the pool's size. At 32
connections that is milliseconds of CPU per request, enough to make the event loop, not the
provider, the bottleneck of a batch. Pools of a few connections keep that scan short.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "CONNECTIONS_PER_POOL",
    "DEFAULT_REPLY_LIMITS",
    "LimitedClient",
    "ReplyLimits",
    "SpreadTransport",
    "pooled_transport",
]


@dataclass(frozen=True)
class ReplyLimits:
    """What one request to an endpoint may take, whatever the endpoint does.

    Args:
        deadline_s: the whole request (connect, send, every byte of the body), not one read:
            an endpoint dripping a byte a second cannot hold a run past it. Per attempt.
        max_bytes: the body, counted after decompression, so neither a huge body nor a
            gzip bomb is ever held in memory whole.
    """

    deadline_s: float = 120.0
    max_bytes: int = 16_000_000

    def __post_init__(self) -> None:
        if self.deadline_s <= 0 or self.max_bytes <= 0:
            raise ValueError("deadline_s and max_bytes must be positive")


DEFAULT_REPLY_LIMITS = ReplyLimits()


class LimitedClient(httpx.AsyncClient):
    """An `httpx.AsyncClient` that carries the `ReplyLimits` of the endpoint it talks to,
    so the one function that sends requests (`send_with_retry`) enforces them for everyone."""

    def __init__(self, *, reply_limits: ReplyLimits = DEFAULT_REPLY_LIMITS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reply_limits = reply_limits


#: Connections per pool: small enough that httpcore's scan stays cheap.
CONNECTIONS_PER_POOL = 8


def pooled_transport(
    max_connections: int, *, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncBaseTransport:
    """A transport holding up to `max_connections` connections, in pools of at most
    `CONNECTIONS_PER_POOL`, so a request waits for a connection only when all are busy."""
    pools = max(1, math.ceil(max_connections / CONNECTIONS_PER_POOL))
    size = max(1, math.ceil(max_connections / pools))
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    transports = [httpx.AsyncHTTPTransport(limits=limits, verify=verify) for _ in range(pools)]
    return transports[0] if pools == 1 else SpreadTransport(transports)


class SpreadTransport(httpx.AsyncBaseTransport):
    """Sends each request through whichever of `transports` has the fewest responses open.

    A response counts until it is closed (httpx closes it once the body is read), which is
    also when its connection goes back to its pool.
    """

    def __init__(self, transports: Sequence[httpx.AsyncBaseTransport]) -> None:
        self._transports = list(transports)
        self._open = [0] * len(self._transports)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self._open)), key=self._open.__getitem__)
        self._open[index] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._open[index] -= 1

        try:
            response = await self._transports[index].handle_async_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _ReleasingStream(response.stream, release)
        return response

    async def aclose(self) -> None:
        for transport in self._transports:
            await transport.aclose()


class _ReleasingStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._release()

"""How every HTTP client reaches its endpoint: the reply limits it carries, and the wire under it.

The clients are httpx's, their exchanges on the wire aiohttp's. httpcore, httpx's own
transport, costs about 2 ms of CPU per request at 16 connections, most of it its pool
polling every idle socket for expiry on each request; aiohttp's pool and C parser cost about
0.6 ms behind the same httpx client (`benchmarks/http_client.py`). At a thousand tests that
difference was the event loop's bottleneck, not the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import yarl

__all__ = [
    "DEFAULT_REPLY_LIMITS",
    "AiohttpTransport",
    "LimitedClient",
    "ReplyLimits",
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


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's requests and responses over aiohttp's connection pool and HTTP parser.

    httpx stays the interface (the clients, the retry policy, the reply limits, proxies from
    the environment); only the exchange on the wire is aiohttp's. aiohttp's errors are raised
    as the httpx errors that describe them, so a failure reads the same whichever transport
    sent it. The body is passed on as it came (httpx decodes it, and the reply limits count
    what it decodes). One aiohttp session per event loop: a client used by one loop opens
    it on its first request there.

    Args:
        max_connections: connections held at once; more requests wait for one.
        verify: the TLS context (or False) of https endpoints.
    """

    def __init__(self, max_connections: int, *, verify: ssl.SSLContext | bool = True) -> None:
        self._max_connections = max(1, max_connections)
        self._verify = verify
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed:
            self._loop = loop
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections,
                    ssl=self._verify,
                    keepalive_timeout=KEEPALIVE_S,
                    resolver=aiohttp.ThreadedResolver(),  # the system's, as httpx resolves
                ),
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx keeps the client's cookies
                auto_decompress=False,
                trust_env=False,  # httpx routes proxied requests to transports of their own
                max_field_size=MAX_HEADER_BYTES,
                max_line_size=MAX_HEADER_BYTES,
            )
        elif self._loop is not loop:
            raise RuntimeError(
                "an HTTP client is shared by two event loops; open one ProviderPool per loop"
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session_here()
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        with _as_httpx_errors(request):
            reply = await session.request(
                request.method,
                yarl.URL(str(request.url), encoded=True),  # httpx has encoded it already
                headers=request.headers.multi_items(),
                data=body or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeouts.get("pool"),
                    sock_connect=timeouts.get("connect"),
                    sock_read=timeouts.get("read"),
                ),
            )
        return httpx.Response(
            reply.status,
            headers=list(reply.raw_headers),
            stream=_AiohttpBody(reply, request),
            extensions={"http_version": b"HTTP/%d.%d" % reply.version},
            request=request,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


#: Seconds an idle connection is kept for the next request (httpx's own default).
KEEPALIVE_S = 5.0
#: The longest header line taken from an endpoint (aiohttp's default is 8 KB).
MAX_HEADER_BYTES = 65_536


class _AiohttpBody(httpx.AsyncByteStream):
    def __init__(self, reply: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._reply = reply
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors(self._request):
            async for chunk in self._reply.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        # The connection goes back to the pool when the body was read whole, else it closes.
        self._reply.release()


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    """aiohttp's errors as the httpx errors for the same failure (the message kept)."""
    try:
        yield
    except aiohttp.ClientError as error:
        # A bad status line's message spans lines and repeats the URL: its first words do.
        said = error.message if isinstance(error, aiohttp.ClientResponseError) else str(error)
        said = " ".join(said.split()) or type(error).__name__
        raise _httpx_error(error)(said, request=request) from error


def _httpx_error(error: aiohttp.ClientError) -> type[httpx.TransportError]:
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout
    if isinstance(error, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout
    if isinstance(error, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake
        return httpx.ConnectError
    if isinstance(error, aiohttp.NonHttpUrlClientError | aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol
    if isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx.RemoteProtocolError  # closed before the response, or mid-body
    if isinstance(error, aiohttp.ClientResponseError):  # not HTTP: a garbled status or header
        return httpx.RemoteProtocolError
    return httpx.ReadError  # reset and other socket errors

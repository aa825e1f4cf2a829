"""How every HTTP client reaches its endpoint: the reply limits it carries, and the wire under it.

The clients are httpx's, their exchanges on the wire aiohttp's. httpcore, httpx's own
transport, costs about 2 ms of CPU per request at 16 connections, most of it its pool
polling every idle socket for expiry on each request; aiohttp's pool and C parser cost about
0.6 ms behind the same httpx client (`benchmarks/http_client.py`). At a thousand tests that
difference was the event loop's bottleneck, not the provider.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import yarl

from eval_pipeline.agents._pacing import Pace

__all__ = [
    "DEFAULT_REPLY_LIMITS",
    "AiohttpTransport",
    "LimitedClient",
    "ReplyLimits",
    "Route",
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
    so the one function that sends requests (`send_with_retry`) enforces them for everyone.

    It also knows its direct routes (`route`): a request that httpx would hand to an
    `AiohttpTransport` unchanged goes to it straight, without httpx building and passing
    it through the client (a third of a completion's CPU, `benchmarks/http_client.py`).
    """

    def __init__(
        self,
        *,
        reply_limits: ReplyLimits = DEFAULT_REPLY_LIMITS,
        pace: Pace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.reply_limits = reply_limits
        #: The pace of the endpoint's requests (its rate limit), kept by `send_with_retry`.
        self.pace = pace
        self._routes: dict[tuple[Any, ...], Route | None] = {}

    def route(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        json_body: bool = False,
    ) -> Route | None:
        """The direct route of a request, or None when httpx must send it itself: the
        client has auth, event hooks or cookies to send, or the URL is mounted on a
        transport other than aiohttp's (a test's, a proxy given to the client).

        Args:
            method, url, headers, timeout: as for `httpx.AsyncClient.build_request`.
            json_body: the body will be JSON (its Content-Type is sent).
        """
        if self.auth is not None or self.cookies or any(self.event_hooks.values()):
            return None
        key = (
            method,
            url,
            tuple(headers.items()) if headers else (),
            None if timeout is None else tuple(timeout.as_dict().items()),
            json_body,
        )
        try:
            return self._routes[key]
        except KeyError:
            pass
        found = self._new_route(method, url, headers=headers, timeout=timeout, json_body=json_body)
        if len(self._routes) < _MAX_ROUTES:  # headers that change per request: not kept
            self._routes[key] = found
        return found

    async def send_direct(self, route: Route, body: bytes | None) -> httpx.Response:
        """Open the response to `body` on `route`, its body not read yet (as `send` with
        `stream=True`). Cookies the endpoint sets are kept, and send the next request the
        way httpx does, with them."""
        response = await route.transport.open(route, body)
        if "set-cookie" in response.headers:
            self.cookies.extract_cookies(response)
        return response

    def _new_route(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None,
        timeout: httpx.Timeout | None,
        json_body: bool,
    ) -> Route | None:
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        # What httpx would send, but the body: its length and type are this request's.
        template = self.build_request(method, url, headers=headers, **extra)
        transport = self._transport_for_url(template.url)  # httpx's lookup of its mounts
        if not isinstance(transport, AiohttpTransport):
            return None
        template.headers.pop("content-length", None)
        if json_body and "content-type" not in template.headers:
            template.headers["content-type"] = "application/json"
        return Route(
            request=template,
            transport=transport,
            url=yarl.URL(str(template.url), encoded=True),
            headers=tuple(template.headers.multi_items()),
            timeout=_client_timeout(template.extensions.get("timeout", {})),
        )


#: Routes one client keeps, at most (one per endpoint and header set).
_MAX_ROUTES = 64


@dataclass(frozen=True)
class Route:
    """One endpoint of a client as httpx would send to it, worked out once.

    Attributes:
        request: the request httpx would build, without a body: the method, URL and headers
            sent, and what errors and responses name.
        transport: the transport httpx would hand it to.
        url: the URL as aiohttp takes it.
        headers: the headers sent.
        timeout: httpx's per-phase timeouts, as aiohttp's.
    """

    request: httpx.Request
    transport: AiohttpTransport
    url: yarl.URL
    headers: tuple[tuple[str, str], ...]
    timeout: aiohttp.ClientTimeout


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's requests and responses over aiohttp's connection pool and HTTP parser.

    httpx stays the interface (the clients, the retry policy, the reply limits); only the
    exchange on the wire is aiohttp's. aiohttp's errors are raised as the httpx errors that
    describe them, so a failure reads the same whichever transport sent it. The body is
    passed on as it came (httpx decodes it, and the reply limits count what it decodes).
    One aiohttp session per event loop: a client used by one loop opens it on its first
    request there.

    Proxies come from the environment as httpx reads them (`HTTP_PROXY`, `HTTPS_PROXY`,
    `ALL_PROXY`, `NO_PROXY`, lower case too), through the standard library's reading of it:
    httpx mounts no proxy of its own on a client given a transport.

    Args:
        max_connections: connections held at once; more requests wait for one.
        verify: the TLS context (or False) of https endpoints.
        trust_env: whether proxies are read from the environment.
    """

    def __init__(
        self,
        max_connections: int,
        *,
        verify: ssl.SSLContext | bool = True,
        trust_env: bool = True,
    ) -> None:
        self._max_connections = max(1, max_connections)
        self._verify = verify
        self._trust_env = trust_env
        self._proxies: dict[tuple[str, str | None, int | None], _Proxy] = {}
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
                trust_env=False,  # proxies are ours to find (`_proxy`), once per origin
                max_field_size=MAX_HEADER_BYTES,
                max_line_size=MAX_HEADER_BYTES,
            )
        elif self._loop is not loop:
            raise RuntimeError(
                "an HTTP client is shared by two event loops; open one ProviderPool per loop"
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        return await self._exchange(
            request,
            yarl.URL(str(request.url), encoded=True),  # httpx has encoded it already
            request.headers.multi_items(),
            body or None,
            _client_timeout(request.extensions.get("timeout", {})),
        )

    async def open(self, route: Route, body: bytes | None) -> httpx.Response:
        """The response to `body` sent on `route` (`LimitedClient.route`), not read yet."""
        return await self._exchange(route.request, route.url, route.headers, body, route.timeout)

    async def _exchange(
        self,
        request: httpx.Request,
        url: yarl.URL,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        timeout: aiohttp.ClientTimeout,
    ) -> httpx.Response:
        session = self._session_here()
        proxy = self._proxy(url)
        with _as_httpx_errors(request):
            reply = await session.request(
                request.method,
                url,
                headers=[*headers, *proxy.request_headers] if proxy.request_headers else headers,
                data=body,
                allow_redirects=False,
                timeout=timeout,
                proxy=proxy.url,
                proxy_headers=proxy.connect_headers,
            )
        return httpx.Response(
            reply.status,
            headers=list(reply.raw_headers),
            stream=_AiohttpBody(reply, request),
            extensions={"http_version": b"HTTP/%d.%d" % reply.version},
            request=request,
        )

    def _proxy(self, url: yarl.URL) -> _Proxy:
        """The proxy of `url`'s origin from the environment, read on its first request."""
        origin = (url.scheme, url.host, url.port)
        found = self._proxies.get(origin)
        if found is None:
            found = _environment_proxy(url) if self._trust_env else _NO_PROXY
            self._proxies[origin] = found
        return found

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


#: Seconds an idle connection is kept for the next request (httpx's own default).
KEEPALIVE_S = 5.0
#: The longest header line taken from an endpoint (aiohttp's default is 8 KB).
MAX_HEADER_BYTES = 65_536


@dataclass(frozen=True)
class _Proxy:
    url: yarl.URL | None = None
    # Its credentials, when its URL carries some: on each request to an http endpoint, on
    # the CONNECT of the tunnel to an https one.
    request_headers: tuple[tuple[str, str], ...] = ()
    connect_headers: Mapping[str, str] | None = None


_NO_PROXY = _Proxy()


def _environment_proxy(url: yarl.URL) -> _Proxy:
    """The proxy the environment names for `url`, unless `NO_PROXY` exempts its host."""
    named = urllib.request.getproxies()
    raw = named.get(url.scheme) or named.get("all")
    if not raw or (url.host is not None and urllib.request.proxy_bypass(url.host)):
        return _NO_PROXY
    proxy = yarl.URL(raw if "://" in raw else f"http://{raw}")
    if proxy.user is None:
        return _Proxy(proxy)
    pair = f"{proxy.user}:{proxy.password or ''}".encode()
    credentials = ("Proxy-Authorization", "Basic " + base64.b64encode(pair).decode())
    if url.scheme == "https":
        return _Proxy(proxy.with_user(None), connect_headers=dict([credentials]))
    return _Proxy(proxy.with_user(None), request_headers=(credentials,))


def _client_timeout(timeouts: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    """httpx's per-phase timeouts as aiohttp's; the whole request's is `ReplyLimits`'."""
    return aiohttp.ClientTimeout(
        total=None,
        connect=timeouts.get("pool"),
        sock_connect=timeouts.get("connect"),
        sock_read=timeouts.get("read"),
    )


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
    """aiohttp's errors as the httpx errors for the same failure (the message kept, less
    the endpoint's bytes its parser quotes)."""
    try:
        yield
    except aiohttp.ClientError as error:
        if isinstance(error, aiohttp.ClientResponseError):
            said = _parser_finding(error.message)
        else:
            said = str(error)
        said = " ".join(said.split()) or type(error).__name__
        raise _httpx_error(error)(said, request=request) from error


#: Where aiohttp's HTTP parser starts quoting what it read, as a Python bytes literal
#: ("Invalid header token:\n\n  b'Set Cookie: …'", "Got more than 65536 bytes when
#: reading: b'…'").
_QUOTED_BYTES = re.compile(r"""\s*:?\s*\bb['"]""")


def _parser_finding(message: str) -> str:
    """What aiohttp's parser found wrong with a reply, without the bytes it quotes: those
    are the endpoint's status line or headers, where a session cookie or token travels."""
    return _QUOTED_BYTES.split(message, maxsplit=1)[0]


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

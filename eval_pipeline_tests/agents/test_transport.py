"""The direct route of the clients: what it sends is what httpx sends, and what httpx would do
differently (cookies, proxies) still happens."""

from __future__ import annotations

import asyncio
import base64
import dataclasses

import httpx
import pytest

from eval_pipeline.agents import RequestRejected, send_with_retry
from eval_pipeline.agents._transport import (  # the unit itself: the pooled HTTP transport
    AiohttpTransport,
    LimitedClient,
)
from eval_pipeline_tests.agents.servers import FAST_RETRY, ScriptedServer, agent_reply

KEY = {"Authorization": "Bearer sk-test-key"}
BODY = {"question": "How many orders?", "nested": {"é": [1, 2.5, None, True]}}


def send(client: httpx.AsyncClient, url: str, times: int = 1) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        async with client:
            return [
                await send_with_retry(
                    client, "POST", url, endpoint="http:test", json=BODY, policy=FAST_RETRY
                )
                for _ in range(times)
            ]

    return asyncio.run(go())


def test_the_direct_route_sends_what_httpx_sends(agent_server):
    agent_server.script(agent_reply("one"), agent_reply("two"))
    direct = LimitedClient(transport=AiohttpTransport(2), headers=KEY)
    assert direct.route("POST", agent_server.base_url, json_body=True) is not None
    [by_route] = send(direct, agent_server.base_url)
    [by_httpx] = send(
        httpx.AsyncClient(transport=AiohttpTransport(2), headers=KEY), agent_server.base_url
    )

    assert by_route.json() == {"text": "one"} and by_httpx.json() == {"text": "two"}
    first, second = agent_server.requests
    assert first.headers == second.headers
    assert first.headers["authorization"] == "Bearer sk-test-key"
    assert first.headers["content-type"] == "application/json"
    assert first.body == second.body  # the same bytes: httpx's JSON encoding
    assert by_route.request.url == by_httpx.request.url


def test_a_cookie_the_endpoint_sets_goes_back_with_the_next_request(agent_server):
    sets_cookie = dataclasses.replace(
        agent_reply("signed"), headers=(("Set-Cookie", "session=abc123; Path=/"),)
    )
    agent_server.script(sets_cookie, agent_reply("again"))
    client = LimitedClient(transport=AiohttpTransport(2))
    send(client, agent_server.base_url, times=2)

    first, second = agent_server.requests
    assert "cookie" not in first.headers
    assert second.headers["cookie"] == "session=abc123"


def test_a_proxy_from_the_environment_carries_the_request(agent_server, monkeypatch):
    # The scripted server stands in for the proxy: it receives the request for the
    # provider's URL, absolute, with the proxy's credentials, and answers 404 to a path
    # that is not its own.
    host = agent_server.url.removeprefix("http://")
    monkeypatch.setenv("HTTP_PROXY", f"http://user:s3cret@{host}")
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RequestRejected):
        send(LimitedClient(transport=AiohttpTransport(2)), "http://provider.example/eval")
    assert agent_server.last.path == "http://provider.example/eval"
    expected = "Basic " + base64.b64encode(b"user:s3cret").decode()
    assert agent_server.last.headers["proxy-authorization"] == expected


def test_no_proxy_exempts_a_host(agent_server, monkeypatch):
    with ScriptedServer("agent") as gone:
        dead = gone.url
    monkeypatch.setenv("HTTP_PROXY", dead)  # a proxy that is down
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    agent_server.script(agent_reply("straight"))
    [reply] = send(LimitedClient(transport=AiohttpTransport(2)), agent_server.base_url)
    assert reply.json() == {"text": "straight"}

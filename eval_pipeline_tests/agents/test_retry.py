"""The retry policy: what is retried, how long it waits, and what it raises when it gives up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.agents import (
    AuthenticationFailed,
    ProtocolError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RequestRejected,
    RetryPolicy,
    parse_retry_after,
    send_with_retry,
)
from eval_pipeline.agents._transport import (  # the unit itself: the pooled HTTP transport
    AiohttpTransport,
    LimitedClient,
)
from eval_pipeline_tests.agents.servers import (
    FAST_RETRY,
    ScriptedServer,
    agent_reply,
    error,
    hang,
    rate_limited,
    reset,
)


class FakeSleep:
    """Records the waits instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(params=["httpx", "direct"])
def new_client(request) -> Callable[..., httpx.AsyncClient]:
    """A client of each way a request is sent: httpx's own client and transport, and the
    direct route of the clients every provider and agent uses (aiohttp, no httpx client
    pass). The policy must read the same whichever sent it."""

    def make(timeout_s: float = 5.0) -> httpx.AsyncClient:
        if request.param == "httpx":
            return httpx.AsyncClient(timeout=timeout_s)
        return LimitedClient(transport=AiohttpTransport(4), timeout=timeout_s)

    return make


@pytest.fixture
def post(new_client) -> Callable[..., httpx.Response]:
    def send(server: ScriptedServer, policy: RetryPolicy, *, timeout_s: float = 5.0):
        async def go() -> httpx.Response:
            async with new_client(timeout_s) as client:
                return await send_with_retry(
                    client, "POST", server.base_url, endpoint="http:test", json={}, policy=policy
                )

        return asyncio.run(go())

    return send


# ---- the policy, without a server --------------------------------------------------------


@given(
    attempt=st.integers(min_value=1, max_value=40),
    jitter=st.floats(min_value=0, max_value=0.999999),
    base=st.floats(min_value=0, max_value=5),
    cap=st.floats(min_value=0, max_value=60),
)
def test_backoff_is_full_jitter_under_an_exponential_ceiling(attempt, jitter, base, cap):
    policy = RetryPolicy(base_delay_s=base, max_delay_s=cap, jitter=lambda: jitter)
    delay = policy.delay_s(attempt)
    ceiling = min(cap, base * 2 ** (attempt - 1))
    assert 0 <= delay <= ceiling
    assert delay == pytest.approx(jitter * ceiling)


@given(retry_after=st.floats(min_value=0, max_value=1e6), cap=st.floats(min_value=0, max_value=60))
def test_retry_after_replaces_backoff_but_is_capped(retry_after, cap):
    policy = RetryPolicy(max_delay_s=cap, jitter=lambda: 0.0)
    assert policy.delay_s(3, retry_after) == min(retry_after, cap)


def test_statuses_retried_and_not():
    policy = RetryPolicy()
    for status in (408, 409, 429, 500, 502, 503, 504, 529):
        assert policy.retries_status(status)
    for status in (400, 401, 403, 404, 422):
        assert not policy.retries_status(status)


def test_retry_after_parses_seconds_dates_and_milliseconds():
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "7"}) == 7
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    in_ten = format_datetime(now + timedelta(seconds=10), usegmt=True)
    assert parse_retry_after({"Retry-After": in_ten}, now=now) == 10
    past = format_datetime(now - timedelta(seconds=10), usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-3"}) is None
    assert parse_retry_after({}) is None


def test_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


# ---- against a real server ---------------------------------------------------------------


def test_retry_after_is_honoured(agent_server, post):
    agent_server.script(rate_limited(retry_after=1), agent_reply("ok"))
    sleep = FakeSleep()
    response = post(agent_server, RetryPolicy(base_delay_s=0.01, max_delay_s=5, sleep=sleep))
    assert response.json() == {"text": "ok"}
    assert sleep.waits == [1]  # the header's wait, not the 0.01 s backoff
    assert len(agent_server.requests) == 2


def test_retry_after_waits_are_passed_to_sleep_and_capped(agent_server, post):
    sleep = FakeSleep()
    agent_server.script(
        rate_limited(retry_after=7), rate_limited(retry_after=120), agent_reply("ok")
    )
    post(agent_server, RetryPolicy(max_delay_s=30, sleep=sleep))
    assert sleep.waits == [7, 30]


def test_server_error_then_success(agent_server, post):
    agent_server.script(error(500), error(503), agent_reply("ok"))
    assert post(agent_server, FAST_RETRY).json()["text"] == "ok"
    assert len(agent_server.requests) == 3


def test_exhausted_retries_raise_with_reason_and_attempt_count(agent_server, post):
    agent_server.script(*[error(503, "overloaded, try later")] * 3)
    with pytest.raises(ProviderUnavailable) as caught:
        post(agent_server, FAST_RETRY)
    assert caught.value.attempts == 3
    assert caught.value.status_code == 503
    assert "after 3 attempts" in str(caught.value)
    assert "overloaded, try later" in str(caught.value)
    assert len(agent_server.requests) == 3


def test_rate_limit_exhausted_is_rate_limited(agent_server, post):
    agent_server.script(*[rate_limited(retry_after=0)] * 3)
    with pytest.raises(RateLimited) as caught:
        post(agent_server, FAST_RETRY)
    assert caught.value.attempts == 3
    assert "test.threads" in str(caught.value)  # says what to do


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_not_retried(agent_server, status, post):
    agent_server.script(error(status, "invalid credentials"), agent_reply("never sent"))
    with pytest.raises(AuthenticationFailed) as caught:
        post(agent_server, FAST_RETRY)
    assert caught.value.attempts == 1
    assert len(agent_server.requests) == 1


def test_other_client_errors_are_rejected_with_the_endpoints_message(agent_server, post):
    agent_server.script(error(400, "model 'gpt-9' does not exist"), agent_reply("never sent"))
    with pytest.raises(RequestRejected) as caught:
        post(agent_server, FAST_RETRY)
    assert "model 'gpt-9' does not exist" in str(caught.value)
    assert len(agent_server.requests) == 1


def test_an_endpoints_long_error_is_kept_on_one_bounded_line(agent_server, post):
    said = "upstream said:\n" + "e" * 10_000
    agent_server.script(error(400, said), agent_reply("never sent"))
    with pytest.raises(RequestRejected) as caught:
        post(agent_server, FAST_RETRY)
    assert caught.value.detail == "upstream said: " + "e" * 284 + "…"
    assert len(str(caught.value)) < 1_000 and "\n" not in str(caught.value)


def test_hang_is_a_timeout_after_retries(agent_server, post):
    agent_server.script(hang(3), hang(3))
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.01)
    with pytest.raises(ProviderTimeout) as caught:
        post(agent_server, policy, timeout_s=0.2)
    # A timeout each time: had the client waited the 3 s hang out, the server would have
    # closed the connection and the error would be a failed connection, not a timeout.
    assert caught.value.attempts == 2 and len(agent_server.requests) == 2
    assert "within 0.2 s" in str(caught.value)


def test_408_is_a_timeout(agent_server, post):
    agent_server.script(error(408), error(408), error(408))
    with pytest.raises(ProviderTimeout):
        post(agent_server, FAST_RETRY)


def test_reset_is_unavailable(agent_server, post):
    agent_server.script(reset(), reset(), reset())
    with pytest.raises(ProviderUnavailable) as caught:
        post(agent_server, FAST_RETRY)
    assert caught.value.attempts == 3
    assert caught.value.status_code is None


def test_reset_then_success(agent_server, post):
    agent_server.script(reset(), agent_reply("ok"))
    assert post(agent_server, FAST_RETRY).json()["text"] == "ok"


def test_connection_refused_is_unavailable(new_client):
    with ScriptedServer("agent") as server:
        url = server.base_url
    with pytest.raises(ProviderUnavailable) as caught:

        async def go() -> None:
            async with new_client() as client:
                await send_with_retry(client, "POST", url, endpoint="http:gone", policy=FAST_RETRY)

        asyncio.run(go())
    assert "could not connect" in str(caught.value)
    assert "Check that the server is up" in str(caught.value)


def test_unsupported_scheme_is_rejected_at_once(new_client):
    async def go() -> None:
        async with new_client() as client:
            await send_with_retry(client, "POST", "ftp://x/y", endpoint="x", policy=FAST_RETRY)

    with pytest.raises(RequestRejected):
        asyncio.run(go())


def test_protocol_error_is_not_retryable():
    assert not ProtocolError.retryable
    assert ProviderUnavailable.retryable and RateLimited.retryable and ProviderTimeout.retryable

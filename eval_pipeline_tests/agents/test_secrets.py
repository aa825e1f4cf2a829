"""A credential never shows in an error message, a repr, a traceback or a log, whatever fails."""

from __future__ import annotations

import asyncio
import logging
import traceback
from datetime import date
from pathlib import Path

import pytest

from eval_pipeline.agents import (
    AgentError,
    AgentRun,
    ChatMessage,
    ProviderPool,
    RetryPolicy,
    redact_url,
    scrub,
)
from eval_pipeline.suite import Case, Message
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    Step,
    error,
    hang,
    json_body,
    missing_fields,
    not_json,
    rate_limited,
    reset,
    suite_config,
)

CANARY = "sk-test-LEAK-CANARY-123"
ENVIRON = {"CANARY_KEY": CANARY}
POLICY = RetryPolicy(max_attempts=2, base_delay_s=0)

# Each failure echoes the credential back, as careless endpoints and proxies do.
FAILURES: dict[str, list[Step]] = {
    "401": [error(401, f"Incorrect API key provided: {CANARY}")],
    "400": [error(400, f"bad request from Bearer {CANARY}")],
    "429": [rate_limited(0)] * 2,
    "500": [error(500, f"upstream said {CANARY}")] * 2,
    "not json": [not_json(f"{CANARY} <html>")],
    "missing fields": [missing_fields()],
    "wrong type": [json_body({"text": [CANARY], "choices": CANARY, "content": CANARY})],
    "reset": [reset()] * 2,
    "hang": [hang(2)] * 2,
}


def assert_no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text
        assert "LEAK-CANARY" not in text


def exercise(server: ScriptedServer, steps: list[Step]) -> tuple[AgentError, str]:
    server.script(*steps)
    if server.protocol == "agent":
        config = suite_config(
            server.agent(
                "bot",
                headers={
                    "Authorization": "Bearer {{ env('CANARY_KEY') }}",
                    "X-Api-Token": "{{ env('CANARY_KEY') }}",
                },
                timeout_s=0.2,
            )
        )
    else:
        config = suite_config(server.provider(api_key="{{ env('CANARY_KEY') }}", timeout_s=0.2))

    async def go() -> str:
        async with ProviderPool(config, policy=POLICY, environ=ENVIRON) as pool:
            if server.protocol == "agent":
                agent = pool.http_agent("http:bot")
                shown = repr(agent) + repr(pool)
                case = Case("t", Path("t.yml"), "t.yml", (Message("user", "q"),))
                run = AgentRun("t", "http:bot", 0, date(2026, 1, 1), "h", "c")
                await agent.run(case, attempt=0, run=run)
            else:
                model = pool.chat_model(f"{server.protocol}:gpt-4.1")
                shown = repr(model) + repr(pool) + repr(config)
                await model.complete([ChatMessage("user", "q")], tools=[], max_tokens=5)
            return shown

    shown = ""
    try:
        shown = asyncio.run(go())
    except AgentError as caught:
        return caught, shown
    raise AssertionError("expected a failure")


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "agent"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_no_failure_leaks_the_key(protocol, failure, caplog):
    caplog.set_level(logging.DEBUG)
    with ScriptedServer(protocol) as server:
        caught, _ = exercise(server, FAILURES[failure])
        # The key really was sent, so its absence below means it was kept out.
        assert any(CANARY in value for value in server.requests[0].headers.values())
    assert_no_canary(
        str(caught),
        repr(caught),
        "".join(traceback.format_exception(caught)),
        caplog.text,
    )


def test_reprs_of_pool_models_and_agents_hold_no_key(openai_server, agent_server):
    config = suite_config(
        openai_server.provider(api_key="{{ env('CANARY_KEY') }}"),
        agent_server.agent("bot", headers={"Authorization": "Bearer {{ env('CANARY_KEY') }}"}),
    )

    async def go() -> str:
        async with ProviderPool(config, environ=ENVIRON) as pool:
            model = pool.chat_model("openai:gpt-4.1")
            agent = pool.http_agent("http:bot")
            return " ".join([repr(pool), repr(model), repr(agent), repr(config), str(vars(model))])

    assert_no_canary(asyncio.run(go()))


def test_scrub_removes_whole_and_partial_credentials():
    text = f"Bearer {CANARY} and {CANARY} again"
    assert scrub(text, [f"Bearer {CANARY}"]) == "[redacted] and [redacted] again"
    assert scrub("nothing here", ["", "ab"]) == "nothing here"


def test_urls_lose_user_info_and_query_values():
    assert (
        redact_url("https://user:pw@api.example.com:8443/v1/x?key=SECRET&v=2#frag")
        == "https://api.example.com:8443/v1/x?key=%5Bredacted%5D&v=%5Bredacted%5D"
    )
    assert redact_url("http://[::1]:8000/eval") == "http://[::1]:8000/eval"

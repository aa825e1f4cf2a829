"""External agents over HTTP (docs/agent-protocol.md): the request contract, reply parsing, and error runs."""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.agents import (
    AgentRun,
    AuthenticationFailed,
    ProtocolError,
    ProviderPool,
    ProviderTimeout,
    ProviderUnavailable,
    QueryRecord,
    RetryPolicy,
    ToolCallRecord,
    Usage,
)
from eval_pipeline.suite import Case, Message, MissingSecret
from eval_pipeline_tests.agents.servers import (
    FAST_RETRY,
    ScriptedServer,
    agent_reply,
    error,
    hang,
    json_body,
    not_json,
    reset,
    suite_config,
)

CASE = Case(
    name="revenue_follow_up",
    path=Path("cases/revenue_follow_up.yml"),
    relative_path="revenue_follow_up.yml",
    messages=(
        Message("user", "What is the total revenue?"),
        Message("assistant", "For which period?"),
        Message("user", "All time."),
    ),
)


def new_run() -> AgentRun:
    return AgentRun(
        case_name=CASE.name,
        model="http:my-agent",
        attempt=2,
        run_date=date(2026, 1, 1),
        input_hash=CASE.input_hash,
        context_hash="ctx",
    )


def run_agent(
    server: ScriptedServer,
    *,
    headers: dict[str, str] | None = None,
    environ: dict[str, str] | None = None,
    timeout_s: float = 5.0,
    policy: RetryPolicy = FAST_RETRY,
    run: AgentRun | None = None,
) -> AgentRun:
    run = run or new_run()
    config = suite_config(server.agent("my-agent", headers=headers, timeout_s=timeout_s))

    async def go() -> None:
        async with ProviderPool(config, policy=policy, environ=environ or {}) as pool:
            await pool.http_agent("http:my-agent").run(CASE, attempt=2, run=run)

    asyncio.run(go())
    return run


def test_request_follows_the_contract_exactly(agent_server):
    agent_server.script(agent_reply("All-time revenue is 42."))
    run_agent(
        agent_server,
        headers={"Authorization": "Bearer {{ env('AGENT_TOKEN') }}", "X-Team": "evals"},
        environ={"AGENT_TOKEN": "tok-123"},
    )
    request = agent_server.last
    assert (request.method, request.path) == ("POST", "/eval")
    assert request.json == {
        "test": "revenue_follow_up",
        "messages": [
            {"role": "user", "content": "What is the total revenue?"},
            {"role": "assistant", "content": "For which period?"},
            {"role": "user", "content": "All time."},
        ],
        "attempt": 2,
        "test_mode": True,
    }
    assert request.headers["authorization"] == "Bearer tok-123"
    assert request.headers["x-team"] == "evals"
    assert request.headers["content-type"] == "application/json"


def test_full_reply_fills_the_run(agent_server):
    agent_server.script(
        agent_reply(
            "Revenue is 42.",
            tool_calls=[
                {
                    "name": "execute_sql",
                    "arguments": {"sql_query": "SELECT 42"},
                    "result": {"rows": [[42]]},
                },
                {"name": "lookup_docs", "arguments": {}},
            ],
            queries=[
                {"id": "q1", "sql": "SELECT 42 AS total", "columns": ["total"], "rows": [[42]]}
            ],
            answer={"columns": ["total_revenue"], "rows": [[42.0]]},
            usage={"input_tokens": 120, "output_tokens": 30},
            cost_usd=0.0012,
        )
    )
    run = run_agent(agent_server)
    assert run.final_text == "Revenue is 42."
    assert run.tool_calls == [
        ToolCallRecord(
            id="call_1",
            name="execute_sql",
            arguments={"sql_query": "SELECT 42"},
            raw_arguments='{"sql_query": "SELECT 42"}',
            result={"rows": [[42]]},
        ),
        ToolCallRecord(id="call_2", name="lookup_docs", arguments={}, raw_arguments="{}"),
    ]
    assert run.queries == [
        QueryRecord(id="q1", sql="SELECT 42 AS total", columns=["total"], rows=[[42]], row_count=1)
    ]
    assert run.answer == {"columns": ["total_revenue"], "rows": [[42.0]]}
    assert run.usage == Usage(input_tokens=120, output_tokens=30)
    assert run.cost_usd == 0.0012
    assert run.turns == 1
    assert run.messages[-1] == {"role": "assistant", "content": "Revenue is 42."}
    assert len(run.messages) == 4


def test_text_alone_is_a_valid_reply(agent_server):
    agent_server.script(agent_reply("I cannot answer that."))
    run = run_agent(agent_server)
    assert run.final_text == "I cannot answer that."
    assert (run.tool_calls, run.queries, run.answer, run.cost_usd) == ([], [], None, None)
    assert run.usage == Usage()


def test_headers_are_resolved_at_each_request(agent_server, monkeypatch):
    agent_server.script(agent_reply("a"), agent_reply("b"))
    config = suite_config(agent_server.agent(headers={"X-Token": "{{ env('ROTATING_TOKEN') }}"}))

    async def go() -> None:
        async with ProviderPool(config, policy=FAST_RETRY) as pool:
            agent = pool.http_agent("http:my-agent")
            monkeypatch.setenv("ROTATING_TOKEN", "first")
            await agent.run(CASE, attempt=0, run=new_run())
            monkeypatch.setenv("ROTATING_TOKEN", "second")
            await agent.run(CASE, attempt=1, run=new_run())

    asyncio.run(go())
    assert [r.headers["x-token"] for r in agent_server.requests] == ["first", "second"]


def test_a_missing_header_secret_names_the_variable(agent_server):
    with pytest.raises(MissingSecret, match="AGENT_TOKEN"):
        run_agent(agent_server, headers={"Authorization": "Bearer {{ env('AGENT_TOKEN') }}"})
    assert agent_server.requests == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"answer": "42"}, "missing field `text`"),
        ({"text": None}, "`text` must be a string, got null"),
        ({"text": 42}, "`text` must be a string, got an integer"),
        ({"text": "x", "tool_calls": {}}, "`tool_calls` must be a list"),
        ({"text": "x", "tool_calls": ["execute_sql"]}, "`tool_calls[0]` must be an object"),
        ({"text": "x", "tool_calls": [{"arguments": {}}]}, "missing field `tool_calls[0].name`"),
        (
            {"text": "x", "tool_calls": [{"name": "f", "arguments": "{}"}]},
            "`tool_calls[0].arguments` must be an object",
        ),
        ({"text": "x", "queries": [{"id": "q1"}]}, "missing field `queries[0].sql`"),
        (
            {"text": "x", "queries": [{"sql": "S", "columns": ["a"], "rows": [[1, 2]]}]},
            "`queries[0].rows[0]` has 2 values for 1 columns",
        ),
        ({"text": "x", "answer": {"rows": [[1]]}}, "missing field `answer.columns`"),
        (
            {"text": "x", "answer": {"columns": ["a"], "rows": [1]}},
            "`answer.rows[0]` must be a list",
        ),
        ({"text": "x", "usage": {"input_tokens": "12"}}, "`usage.input_tokens` must be an integer"),
        (
            {"text": "x", "usage": {"output_tokens": -1}},
            "`usage.output_tokens` must be an integer from 0 to",
        ),
        (
            {"text": "x", "usage": {"input_tokens": 10**30}},
            "`usage.input_tokens` must be an integer from 0 to 9223372036854775807, got 1e+30",
        ),
        ({"text": "x", "usage": {"input_tokens": 1e30}}, "`usage.input_tokens` must be an integer"),
        ({"text": "x", "cost_usd": float("nan")}, "`cost_usd` must be a finite number"),
        ({"text": "x", "cost_usd": float("inf")}, "`cost_usd` must be a finite number"),
        ({"text": "x", "cost_usd": -0.5}, "`cost_usd` must be a finite number of at least 0"),
        ({"text": "x", "cost_usd": "0.1"}, "`cost_usd` must be a number"),
        ({"text": "x", "cost_usd": True}, "`cost_usd` must be a number"),
        (["text"], "the body must be a JSON object"),
    ],
)
def test_ill_shaped_replies_are_protocol_errors_naming_the_field(agent_server, body, message):
    agent_server.script(json_body(body))
    run = new_run()
    with pytest.raises(ProtocolError) as caught:
        run_agent(agent_server, run=run)
    assert message in str(caught.value)
    assert "http:my-agent" in str(caught.value)
    assert run == new_run()  # an error run is left untouched for the caller to mark


def test_invalid_json_is_a_protocol_error(agent_server):
    agent_server.script(not_json("Internal Server Error"))
    with pytest.raises(ProtocolError, match="not JSON"):
        run_agent(agent_server)


def test_non_2xx_after_retries_is_an_error(agent_server):
    agent_server.script(error(502), error(500), error(503))
    with pytest.raises(ProviderUnavailable) as caught:
        run_agent(agent_server)
    assert caught.value.attempts == 3
    assert len(agent_server.requests) == 3


def test_server_error_then_success(agent_server):
    agent_server.script(error(500), reset(), agent_reply("ok"))
    assert run_agent(agent_server).final_text == "ok"


def test_refused_auth_is_not_retried(agent_server):
    agent_server.script(error(403, "forbidden"))
    with pytest.raises(AuthenticationFailed):
        run_agent(agent_server)
    assert len(agent_server.requests) == 1


def test_timeout(agent_server):
    agent_server.script(hang(3), hang(3))
    with pytest.raises(ProviderTimeout):
        run_agent(agent_server, timeout_s=0.2, policy=RetryPolicy(max_attempts=2, base_delay_s=0))


def test_many_concurrent_runs(agent_server):
    agent_server.latency_s = 0.2
    agent_server.set_script(lambda request, _i: agent_reply(f"answer to {request.json['attempt']}"))
    config = suite_config(agent_server.agent(), threads=32)

    async def go() -> list[Any]:
        async with ProviderPool(config, policy=FAST_RETRY) as pool:
            agent = pool.http_agent("http:my-agent")
            runs = [new_run() for _ in range(32)]
            await asyncio.gather(*(agent.run(CASE, attempt=i, run=r) for i, r in enumerate(runs)))
            return runs

    runs = asyncio.run(go())
    assert [r.final_text for r in runs] == [f"answer to {i}" for i in range(32)]

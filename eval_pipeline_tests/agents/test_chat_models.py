"""Both providers against real servers: tool-call round trips, usage and cost, and every fault."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.agents import (
    AuthenticationFailed,
    CachedChatModel,
    ChatMessage,
    Completion,
    MemoryCache,
    ProtocolError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RequestRejected,
    RetryPolicy,
    ToolSpec,
    Usage,
    completion_key,
    completion_to_dict,
    cost_usd,
)
from eval_pipeline.suite import ModelCosts
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    Tokens,
    answer,
    by_turn,
    call,
    complete,
    error,
    execute_sql,
    hang,
    json_body,
    missing_fields,
    not_json,
    open_chat_model,
    rate_limited,
    repeat,
    reset,
    sql_then_answer,
    tool_calls,
)

SQL_TOOL = ToolSpec(
    "execute_sql",
    "Run one read-only SQL query on the warehouse.",
    {"type": "object", "properties": {"sql_query": {"type": "string"}}, "required": ["sql_query"]},
)
LIST_TOOL = ToolSpec("list_tables", "List the warehouse tables.", {"type": "object"})
QUESTION = [
    ChatMessage("system", "You answer questions with SQL."),
    ChatMessage("user", "What is the total revenue?"),
]


@pytest.fixture(params=["openai", "anthropic"])
def server(request) -> ScriptedServer:
    """Each test runs against both providers' wire protocols."""
    return request.getfixturevalue(f"{request.param}_server")


def test_tool_call_round_trip_with_parallel_calls(server):
    server.script(
        tool_calls(execute_sql("SELECT SUM(amount) FROM orders"), call("list_tables")),
        answer("Total revenue is 42."),
    )

    async def conversation():
        async with open_chat_model(server) as model:
            first = await model.complete(QUESTION, tools=[SQL_TOOL, LIST_TOOL], max_tokens=500)
            transcript = [
                *QUESTION,
                ChatMessage("assistant", first.text, tool_calls=first.tool_calls),
                ChatMessage("tool", "total\n42", tool_call_id=first.tool_calls[0].id),
                ChatMessage("tool", "orders", tool_call_id=first.tool_calls[1].id),
            ]
            second = await model.complete(transcript, tools=[SQL_TOOL, LIST_TOOL], max_tokens=500)
            return first, second

    first, second = asyncio.run(conversation())
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("execute_sql", {"sql_query": "SELECT SUM(amount) FROM orders"}),
        ("list_tables", {}),
    ]
    assert len({c.id for c in first.tool_calls}) == 2
    assert first.stop_reason in ("tool_calls", "tool_use")
    assert second.text == "Total revenue is 42."
    assert second.tool_calls == ()
    assert second.raw is not None and second.raw["id"]
    # The second request carried both results, each answering its own call.
    sent = server.last.json
    ids = [c.id for c in first.tool_calls]
    if server.protocol == "openai":
        assert [m["role"] for m in sent["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
        ]
        assert [m["tool_call_id"] for m in sent["messages"][3:]] == ids
        assert [m["content"] for m in sent["messages"][3:]] == ["total\n42", "orders"]
    else:
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        results = sent["messages"][2]["content"]
        assert [(b["type"], b["tool_use_id"], b["content"]) for b in results] == [
            ("tool_result", ids[0], "total\n42"),
            ("tool_result", ids[1], "orders"),
        ]


def test_text_alongside_tool_calls(server):
    server.script(tool_calls(execute_sql("SELECT 1"), text="Let me look that up."))
    completion = complete(server, QUESTION, [SQL_TOOL])
    assert completion.text == "Let me look that up."
    assert [c.name for c in completion.tool_calls] == ["execute_sql"]


def test_usage_is_normalised_and_costed_at_configured_prices(server):
    server.script(answer("42", tokens=Tokens(input=1_000_000, output=100_000, cached=400_000)))
    prices = ModelCosts(input_no_cache=2.0, input_cache_read=0.5, output=8.0)

    async def go():
        async with open_chat_model(server, "house-model", costs={"house-model": prices}) as model:
            return model, await model.complete(QUESTION, tools=[], max_tokens=10)

    model, completion = asyncio.run(go())
    assert (completion.usage.input_tokens, completion.usage.cached_input_tokens) == (
        1_000_000,
        400_000,
    )
    assert completion.usage.output_tokens == 100_000
    assert model.costs == prices
    assert cost_usd(completion.usage, model.costs) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 0.1 * 8)


def test_unknown_model_has_unknown_cost(server):
    server.script(answer("42"))

    async def go():
        async with open_chat_model(server, "some-local-model") as model:
            return model, await model.complete(QUESTION, tools=[], max_tokens=10)

    model, completion = asyncio.run(go())
    assert model.costs is None
    assert cost_usd(completion.usage, model.costs) is None


def test_known_model_is_priced_from_the_table(server):
    known, price = {
        "openai": ("gpt-4.1-mini", (0.40, 0.10, 1.60)),
        "anthropic": ("claude-sonnet-4-5-20250929", (3.0, 0.30, 15.0)),  # a dated snapshot
    }[server.protocol]
    server.script(answer("42"))

    async def go():
        async with open_chat_model(server, known) as model:
            return model

    costs = asyncio.run(go()).costs
    assert (costs.input_no_cache, costs.input_cache_read, costs.output) == price


def test_server_error_then_success(server):
    server.script(error(500), error(503), answer("42"))
    assert complete(server, QUESTION).text == "42"
    assert len(server.requests) == 3


def test_rate_limit_retry_after_is_honoured(server):
    server.script(rate_limited(retry_after=0.3), answer("42"))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # records the wait instead of sleeping
        waits.append(seconds)

    policy = RetryPolicy(base_delay_s=0.01, sleep=sleep)
    assert complete(server, QUESTION, policy=policy).text == "42"
    # One wait, as long as Retry-After (less the moment between the answer and the turn).
    assert waits == [pytest.approx(0.3, abs=0.05)] and len(server.requests) == 2


def test_rate_limit_exhausted(server):
    server.script(rate_limited(0), rate_limited(0), rate_limited(0))
    with pytest.raises(RateLimited) as caught:
        complete(server, QUESTION)
    assert caught.value.attempts == 3
    assert caught.value.endpoint == f"{server.protocol}:gpt-4.1"


def test_hang_is_a_timeout(server):
    server.script(hang(3), hang(3), hang(3))
    with pytest.raises(ProviderTimeout) as caught:
        complete(
            server, QUESTION, timeout_s=0.2, policy=RetryPolicy(max_attempts=2, base_delay_s=0)
        )
    assert caught.value.attempts == 2


def test_reset_is_unavailable(server):
    server.script(reset(), reset(), reset())
    with pytest.raises(ProviderUnavailable):
        complete(server, QUESTION)


@pytest.mark.parametrize("step", [not_json(), missing_fields(), json_body([1, 2])])
def test_malformed_body_is_a_protocol_error(server, step):
    server.script(step)
    with pytest.raises(ProtocolError) as caught:
        complete(server, QUESTION)
    assert len(server.requests) == 1  # a malformed 200 is not retried
    assert caught.value.status_code == 200


def test_protocol_error_names_the_field(server):
    body = (
        {"choices": [{"message": {"content": 7}}]}
        if server.protocol == "openai"
        else {"content": [{"type": "text", "text": 7}]}
    )
    server.script(json_body(body))
    with pytest.raises(
        ProtocolError,
        match=r"`(choices\[0\]\.message\.content|content\[0\]\.text)` must be a string",
    ):
        complete(server, QUESTION)


def test_unauthorised_is_not_retried(server):
    server.script(error(401, "invalid x-api-key"), answer("never"))
    with pytest.raises(AuthenticationFailed):
        complete(server, QUESTION, api_key="sk-wrong-but-harmless")
    assert len(server.requests) == 1


def test_bad_request_carries_the_providers_message(server):
    server.script(error(404, "model: gpt-9 not found"))
    with pytest.raises(RequestRejected, match="model: gpt-9 not found"):
        complete(server, QUESTION)


def test_sql_then_answer_script_drives_both_protocols(server):
    server.set_script(by_turn(*sql_then_answer("SELECT 1", "One.")))
    completion = complete(server, QUESTION, [SQL_TOOL])
    assert completion.tool_calls[0].arguments == {"sql_query": "SELECT 1"}


def test_many_concurrent_conversations(server):
    """32 conversations at once against a 200 ms server finish in about one round trip each."""
    server.latency_s = 0.2
    server.set_script(by_turn(*sql_then_answer("SELECT 1", "One.")))

    async def conversation(model):
        first = await model.complete(QUESTION, tools=[SQL_TOOL], max_tokens=50)
        transcript = [
            *QUESTION,
            ChatMessage("assistant", first.text, tool_calls=first.tool_calls),
            ChatMessage("tool", "1", tool_call_id=first.tool_calls[0].id),
        ]
        return await model.complete(transcript, tools=[SQL_TOOL], max_tokens=50)

    async def go():
        async with open_chat_model(server, threads=32) as model:
            return await asyncio.gather(*(conversation(model) for _ in range(32)))

    results = asyncio.run(go())
    assert [r.text for r in results] == ["One."] * 32
    assert len(server.requests) == 64
    # every conversation was waiting on the server at the same time, not one after another
    assert server.peak_in_flight >= 24


# ---- replies cut by max_tokens ------------------------------------------------------------------


def test_a_cut_answer_left_in_a_cache_is_asked_again_not_served(server):
    # A cache written before cut replies were errors may hold one; serving it would grade it,
    # and raising on it would keep failing after the user raised max_tokens.
    server.set_script(repeat(answer("Revenue is 780.")))
    cache = MemoryCache()
    cut = Completion("Revenue is 7", (), Usage(10, 0, 1024), stop_reason="length")

    async def go():
        async with open_chat_model(server) as model:
            cache.put(completion_key(model.model_id, QUESTION, (), 1024), completion_to_dict(cut))
            cached = CachedChatModel(model, cache)
            return await cached.complete(QUESTION, tools=(), max_tokens=1024), cached

    completion, cached = asyncio.run(go())
    assert completion.text == "Revenue is 780." and len(server.requests) == 1
    assert (cached.hits, cached.misses) == (0, 1)

"""Anthropic Messages on the wire: system prompt, tool_use / tool_result blocks, cache-aware usage."""

from __future__ import annotations

from eval_pipeline.agents import ChatMessage, RequestedToolCall, ToolSpec, anthropic_messages
from eval_pipeline_tests.agents.servers import Tokens, answer, complete, json_body

TOOL = ToolSpec("execute_sql", "Run SQL.", {"type": "object", "properties": {}})


def test_request_shape_system_prompt_and_auth(anthropic_server):
    anthropic_server.script(answer("hi"))
    complete(
        anthropic_server,
        [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello")],
        [TOOL],
        model="claude-sonnet-4-5",
        max_tokens=321,
        api_key="{{ env('ANTHROPIC_TEST_KEY') }}",
        environ={"ANTHROPIC_TEST_KEY": "sk-ant-test"},
    )
    request = anthropic_server.last
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.json == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 321,
        "system": "Be brief.",  # top level, not a message
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
        "tools": [
            {"name": "execute_sql", "description": "Run SQL.", "input_schema": TOOL.parameters}
        ],
    }


def test_tool_uses_and_results_in_blocks_with_consecutive_results_merged():
    calls = (
        RequestedToolCall(
            "toolu_a", "execute_sql", '{"sql_query": "SELECT 1"}', {"sql_query": "SELECT 1"}
        ),
        RequestedToolCall("toolu_b", "list_tables", "{}", {}),
    )
    system, turns = anthropic_messages(
        [
            ChatMessage("system", "Rules."),
            ChatMessage("user", "q"),
            ChatMessage("assistant", "Checking.", tool_calls=calls),
            ChatMessage("tool", "1", tool_call_id="toolu_a"),
            ChatMessage("tool", "orders", tool_call_id="toolu_b"),
            ChatMessage("assistant", "Done."),
            ChatMessage("user", "And last year?"),
        ]
    )
    assert system == "Rules."
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "execute_sql",
                    "input": {"sql_query": "SELECT 1"},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "list_tables", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "orders"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "And last year?"}]},
    ]


def test_tool_calls_only_turn_has_no_empty_text_block():
    call = RequestedToolCall("toolu_a", "list_tables", "{}", {})
    _, turns = anthropic_messages(
        [ChatMessage("user", "q"), ChatMessage("assistant", "", tool_calls=(call,))]
    )
    assert [b["type"] for b in turns[1]["content"]] == ["tool_use"]


def test_usage_counts_cache_reads_and_writes_as_input(anthropic_server):
    anthropic_server.script(answer("x", tokens=Tokens(input=1500, output=40, cached=1000)))
    usage = complete(anthropic_server, [ChatMessage("user", "q")]).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1500, 1000, 40)

    body = {
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": None,
            "output_tokens": 3,
        },
    }
    anthropic_server.script(json_body(body))
    usage = complete(anthropic_server, [ChatMessage("user", "q")]).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (210, 0, 3)


def test_other_block_types_are_ignored(anthropic_server):
    body = {
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "x"},
            {"type": "text", "text": "Answer."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    anthropic_server.script(json_body(body))
    completion = complete(anthropic_server, [ChatMessage("user", "q")])
    assert completion.text == "Answer."
    assert completion.stop_reason == "end_turn"
    assert completion.raw == body

"""OpenAI Chat Completions on the wire: what is sent, and what is read back."""

from __future__ import annotations

import json

from eval_pipeline.agents import ChatMessage, RequestedToolCall, ToolSpec, openai_messages
from eval_pipeline_tests.agents.servers import (
    Tokens,
    answer,
    call,
    complete,
    json_body,
    tool_calls,
)

TOOL = ToolSpec("execute_sql", "Run SQL.", {"type": "object", "properties": {}})


def test_request_shape_and_bearer_auth(openai_server):
    openai_server.script(answer("hi"))
    complete(
        openai_server,
        [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello")],
        [TOOL],
        max_tokens=321,
        api_key="{{ env('OPENAI_TEST_KEY') }}",
        environ={"OPENAI_TEST_KEY": "sk-test-abc"},
    )
    request = openai_server.last
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test-abc"
    assert request.json == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
        ],
        # A custom base_url means an OpenAI-compatible server: the widely known field name.
        "max_tokens": 321,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "execute_sql",
                    "description": "Run SQL.",
                    "parameters": TOOL.parameters,
                },
            }
        ],
    }


def test_compatible_server_without_a_key(openai_server):
    openai_server.script(answer("local answer"))
    completion = complete(
        openai_server, [ChatMessage("user", "Hi")], name="ollama", model="llama3.1:8b"
    )
    assert completion.text == "local answer"
    assert "authorization" not in openai_server.last.headers
    assert openai_server.last.json["model"] == "llama3.1:8b"
    assert "tools" not in openai_server.last.json  # none offered: the key is left out


def test_assistant_tool_calls_are_sent_back_verbatim():
    calls = (
        RequestedToolCall(
            "call_a", "execute_sql", '{"sql_query": "SELECT 1"}', {"sql_query": "SELECT 1"}
        ),
        RequestedToolCall("call_b", "list_tables", "{}", {}),
    )
    wire = openai_messages(
        [
            ChatMessage("user", "q"),
            ChatMessage("assistant", "", tool_calls=calls),
            ChatMessage("tool", "1", tool_call_id="call_a", name="execute_sql"),
            ChatMessage("tool", "orders", tool_call_id="call_b", name="list_tables"),
            ChatMessage("assistant", "Done."),
        ]
    )
    assert wire[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "execute_sql", "arguments": '{"sql_query": "SELECT 1"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "list_tables", "arguments": "{}"},
            },
        ],
    }
    assert wire[2] == {"role": "tool", "tool_call_id": "call_a", "content": "1"}
    assert wire[3] == {"role": "tool", "tool_call_id": "call_b", "content": "orders"}
    assert wire[4] == {"role": "assistant", "content": "Done."}


def test_invalid_json_arguments_are_kept_raw_not_raised(openai_server):
    openai_server.script(
        tool_calls(call("execute_sql", '{"sql_query": "SELECT 1"'), call("list_tables", "[1]"))
    )
    completion = complete(openai_server, [ChatMessage("user", "q")], [TOOL])
    broken, not_an_object = completion.tool_calls
    assert broken.arguments is None
    assert broken.raw_arguments == '{"sql_query": "SELECT 1"'
    assert not_an_object.arguments is None


def test_arguments_sent_as_an_object_are_accepted(openai_server):
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "type": "function",
                            "function": {
                                "name": "execute_sql",
                                "arguments": {"sql_query": "SELECT 2"},
                            },
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    openai_server.script(json_body(body))
    completion = complete(openai_server, [ChatMessage("user", "q")], [TOOL])
    (only,) = completion.tool_calls
    assert only.arguments == {"sql_query": "SELECT 2"}
    assert json.loads(only.raw_arguments) == {"sql_query": "SELECT 2"}
    assert only.id == "call_0"  # a missing id is made up: the tool result must answer one
    assert completion.usage.total_tokens == 0  # no usage reported: zero, not a failure


def test_cached_prompt_tokens_are_read(openai_server):
    openai_server.script(answer("x", tokens=Tokens(input=1200, output=30, cached=1024)))
    usage = complete(openai_server, [ChatMessage("user", "q")]).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1200, 1024, 30)


def test_null_usage_details_are_zero(openai_server):
    body = {
        "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": None},
    }
    openai_server.script(json_body(body))
    usage = complete(openai_server, [ChatMessage("user", "q")]).usage
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (5, 0, 2)


def test_the_openai_api_gets_max_completion_tokens():
    """Reasoning models at api.openai.com refuse `max_tokens`; the newer name works for all."""
    import httpx

    from eval_pipeline.agents import OpenAIChatModel

    model = OpenAIChatModel(httpx.AsyncClient(), "o3")
    body = model.request_body([ChatMessage("user", "q")], tools=[], max_tokens=99)
    assert model.url == "https://api.openai.com/v1/chat/completions"
    assert body["max_completion_tokens"] == 99
    assert "max_tokens" not in body


def test_a_refusal_is_the_reply(openai_server):
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": "I can't help with that.",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    openai_server.script(json_body(body))
    assert complete(openai_server, [ChatMessage("user", "q")]).text == "I can't help with that."

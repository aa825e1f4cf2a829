"""Anthropic Messages over httpx: system prompt, tool_use / tool_result blocks, cache-aware usage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from eval_pipeline.agents._chat import HttpChatModel
from eval_pipeline.agents._types import (
    ChatMessage,
    Completion,
    RequestedToolCall,
    ToolSpec,
    Usage,
)
from eval_pipeline.agents._wire import BodyReader

__all__ = [
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_VERSION",
    "AnthropicChatModel",
    "anthropic_headers",
    "anthropic_messages",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


def anthropic_headers(api_key: str | None) -> dict[str, str]:
    """Client headers: the API version always, the key when one is configured."""
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers["x-api-key"] = api_key
    return headers


class AnthropicChatModel(HttpChatModel):
    """A model behind `POST {base_url}/v1/messages` (see `HttpChatModel` for the args)."""

    default_provider = "anthropic"
    default_base_url = ANTHROPIC_BASE_URL
    path = "/v1/messages"

    def request_body(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]:
        """The JSON body of one Messages request."""
        system, turns = anthropic_messages(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                }
                for tool in tools
            ]
        return body

    def parse(self, reader: BodyReader) -> Completion:
        return parse_anthropic_completion(reader)


def anthropic_messages(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the turns in Messages shape.

    System messages become the top-level `system` string. Tool results become `tool_result`
    blocks of a user turn, and consecutive turns of one role are merged into one, since the
    API wants user and assistant turns to alternate.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if message.role == "tool":
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                }
            )
        else:
            # The API rejects empty text blocks (an assistant turn may be tool calls only).
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments if call.arguments is not None else {},
                }
                for call in message.tool_calls
            )
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(part for part in system if part), turns


def parse_anthropic_completion(reader: BodyReader) -> Completion:
    """A `Completion` from a Messages response body."""
    body = reader.root()
    content = reader.field(body, "content", "content", list)
    texts: list[str] = []
    calls: list[RequestedToolCall] = []
    for i, block in enumerate(content):
        path = f"content[{i}]"
        if not isinstance(block, dict):
            reader.fail(f"`{path}` must be an object")
        kind = reader.field(block, "type", f"{path}.type", str)
        if kind == "text":
            texts.append(reader.field(block, "text", f"{path}.text", str))
        elif kind == "tool_use":
            arguments = block.get("input")
            calls.append(
                RequestedToolCall(
                    id=reader.field(block, "id", f"{path}.id", str),
                    name=reader.field(block, "name", f"{path}.name", str),
                    raw_arguments=json.dumps(arguments),
                    arguments=arguments if isinstance(arguments, dict) else None,
                )
            )
        # Other blocks (thinking, server tools) carry nothing the agent loop acts on.
    stop_reason = body.get("stop_reason")
    return Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=_usage(reader, body),
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
        raw=body,
    )


def _usage(reader: BodyReader, body: dict[str, Any]) -> Usage:
    usage = reader.field(body, "usage", "usage", dict, required=False, default={})

    def count(key: str) -> int:
        return reader.count(usage, key, f"usage.{key}")

    # Anthropic's `input_tokens` excludes cache reads and writes; ours counts all input.
    cache_read = count("cache_read_input_tokens")
    return Usage(
        input_tokens=count("input_tokens") + cache_read + count("cache_creation_input_tokens"),
        cached_input_tokens=cache_read,
        output_tokens=count("output_tokens"),
    )

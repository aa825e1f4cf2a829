"""OpenAI Chat Completions over httpx, for api.openai.com and any OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from eval_pipeline.agents._chat import HttpChatModel
from eval_pipeline.agents._types import (
    ChatMessage,
    Completion,
    RequestedToolCall,
    ToolSpec,
    Usage,
)
from eval_pipeline.agents._wire import BodyReader, parse_arguments

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel", "openai_headers", "openai_messages"]

OPENAI_BASE_URL = "https://api.openai.com/v1"


def openai_headers(api_key: str | None) -> dict[str, str]:
    """Client headers: Bearer auth when a key is configured (local servers often need none)."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class OpenAIChatModel(HttpChatModel):
    """A model behind `POST {base_url}/chat/completions` (see `HttpChatModel` for the args)."""

    default_provider = "openai"
    default_base_url = OPENAI_BASE_URL
    path = "/chat/completions"

    def __init__(
        self, client: httpx.AsyncClient, model: str, *, base_url: str | None = None, **options: Any
    ) -> None:
        super().__init__(client, model, base_url=base_url, **options)
        # OpenAI's reasoning models refuse `max_tokens`, while some compatible servers only
        # know `max_tokens`; OpenAI itself accepts the newer name for every model.
        self._max_tokens_field = "max_completion_tokens" if base_url is None else "max_tokens"

    def request_body(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]:
        """The JSON body of one completion request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(messages),
            self._max_tokens_field: max_tokens,
        }
        if tools:
            # An empty `tools` list is an error on some servers, so it is left out instead.
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in tools
            ]
        return body

    def parse(self, reader: BodyReader) -> Completion:
        return parse_openai_completion(reader)


def openai_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The transcript in Chat Completions shape."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.raw_arguments},
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            wire.append({"role": message.role, "content": message.content})
    return wire


def parse_openai_completion(reader: BodyReader) -> Completion:
    """A `Completion` from a Chat Completions response body."""
    body = reader.root()
    choices = reader.field(body, "choices", "choices", list)
    if not choices:
        reader.fail("`choices` is empty")
    choice = choices[0]
    if not isinstance(choice, dict):
        reader.fail("`choices[0]` must be an object")
    message = reader.field(choice, "message", "choices[0].message", dict)
    text = reader.field(message, "content", "choices[0].message.content", str, required=False)
    # A refusal comes instead of content; it is the model's reply, so the agent sees it.
    text = text or reader.field(
        message, "refusal", "choices[0].message.refusal", str, required=False
    )
    raw_calls = reader.field(
        message, "tool_calls", "choices[0].message.tool_calls", list, required=False, default=[]
    )
    calls = []
    for i, raw_call in enumerate(raw_calls):
        path = f"choices[0].message.tool_calls[{i}]"
        if not isinstance(raw_call, dict):
            reader.fail(f"`{path}` must be an object")
        function = reader.field(raw_call, "function", f"{path}.function", dict)
        name = reader.field(function, "name", f"{path}.function.name", str)
        # Some compatible servers omit the id; the tool result still needs one to answer.
        call_id = reader.field(raw_call, "id", f"{path}.id", str, required=False) or f"call_{i}"
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            raw, parsed = arguments, parse_arguments(arguments)
        elif isinstance(arguments, dict):
            # Some compatible servers send an object instead of OpenAI's JSON text.
            raw, parsed = json.dumps(arguments), arguments
        else:
            raw, parsed = json.dumps(arguments), None
        calls.append(RequestedToolCall(id=call_id, name=name, raw_arguments=raw, arguments=parsed))
    finish_reason = choice.get("finish_reason")
    return Completion(
        text=text or "",
        tool_calls=tuple(calls),
        usage=_usage(reader, body),
        stop_reason=finish_reason if isinstance(finish_reason, str) else None,
        raw=body,
    )


def _usage(reader: BodyReader, body: dict[str, Any]) -> Usage:
    # Compatible servers may omit usage; tokens then count as 0 rather than failing the run.
    usage = reader.field(body, "usage", "usage", dict, required=False, default={})
    details_path = "usage.prompt_tokens_details"
    details = reader.field(
        usage, "prompt_tokens_details", details_path, dict, required=False, default={}
    )

    def count(container: dict[str, Any], key: str, path: str) -> int:
        return reader.count(container, key, f"{path}.{key}")

    return Usage(
        input_tokens=count(usage, "prompt_tokens", "usage"),
        cached_input_tokens=count(details, "cached_tokens", details_path),
        output_tokens=count(usage, "completion_tokens", "usage"),
    )

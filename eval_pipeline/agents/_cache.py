"""Completions cached by their exact inputs, so regrading never pays twice for the same judge call.

Every answer is kept, one without a verdict too: it is what the model says to those inputs, and
asking the same question again on an unchanged rerun would only pay for it twice (`--rejudge`
asks again). A model that did not answer (unreachable, rate-limited, timed out) raised instead,
so there is nothing to keep and the next grading asks again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from eval_pipeline.agents._types import ChatMessage, Completion, RequestedToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from eval_pipeline.agents._chat import ChatModel


class CompletionCache(Protocol):
    """Somewhere to keep completions by key (the store provides a persistent one)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, value: dict[str, Any]) -> None: ...


class MemoryCache:
    """A process-local `CompletionCache`."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = value

    def __len__(self) -> int:
        return len(self._items)


def completion_key(
    model_id: str,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    max_tokens: int,
    settings: Mapping[str, Any] | None = None,
) -> str:
    payload = {
        "model": model_id,
        "messages": [asdict(m) for m in messages],
        "tools": [asdict(t) for t in tools],
        "max_tokens": max_tokens,
    }
    if settings:  # only then, so answers cached for a model without settings keep their keys
        payload["settings"] = dict(settings)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def completion_to_dict(completion: Completion) -> dict[str, Any]:
    return {
        "text": completion.text,
        "tool_calls": [asdict(c) for c in completion.tool_calls],
        "usage": asdict(completion.usage),
        "stop_reason": completion.stop_reason,
    }


def completion_from_dict(data: dict[str, Any]) -> Completion:
    return Completion(
        text=data["text"],
        tool_calls=tuple(RequestedToolCall(**c) for c in data["tool_calls"]),
        usage=Usage(**data["usage"]),
        stop_reason=data.get("stop_reason"),
    )


class CachedChatModel:
    """A `ChatModel` that answers repeated identical requests from a cache.

    Args:
        model: the model asked on a miss.
        cache: where answers are kept.
        refresh: ask the model even when the cache has an answer (`--rejudge`); the fresh
            answers replace the cached ones.
        sample: which of several independent answers to the same request this model gives
            (`--rejudge-samples`): each sample is asked and cached on its own; 0 is the usual.

    `hits` and `misses` tell a caller how many calls were really made.
    """

    def __init__(
        self, model: ChatModel, cache: CompletionCache, *, refresh: bool = False, sample: int = 0
    ) -> None:
        self.model = model
        self.sample = sample
        self.model_id = model.model_id
        self.costs = model.costs
        self.cache = cache
        self.refresh = refresh
        self.hits = 0
        self.misses = 0

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
    ) -> Completion:
        # A configured model's request settings (temperature, ...) change what it answers.
        settings = getattr(self.model, "settings", None)
        key = completion_key(self.model_id, messages, tools, max_tokens, settings)
        if self.sample:
            key = f"{key}:sample{self.sample}"
        cached = None if self.refresh else self.cache.get(key)
        if cached is not None:
            completion = completion_from_dict(cached)
            # A cut answer cached by an older version (a cut reply is an error now) is asked again.
            if not completion.cut:
                self.hits += 1
                return completion
        completion = await self.model.complete(messages, tools=tools, max_tokens=max_tokens)
        self.misses += 1
        self.cache.put(key, completion_to_dict(completion))
        return completion

"""Record and replay: keep the model exchanges of a run, and serve them back offline, deterministically.

Which test, attempt and purpose a completion belongs to travels in a context variable set
by whoever starts the work (the run loop, the grader), so models need not know about tests,
and concurrent runs never mix their turns.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.agents._cache import completion_from_dict, completion_to_dict
from eval_pipeline.agents._errors import AgentError
from eval_pipeline.agents._types import ChatMessage, Completion, ToolSpec
from eval_pipeline.suite._secrets import redact_value

if TYPE_CHECKING:
    from eval_pipeline.agents._chat import ChatModel

REPLAY_PREFIX = "replay:"


@dataclass
class CallContext:
    """What a model call is for: the agent's run of a test, or a grading purpose."""

    test: str
    attempt: int = 0
    purpose: str = "agent"  # "agent", "extraction", "evaluator:<name>", "consistency", ...
    turns: dict[str, int] = field(default_factory=dict)

    def next_turn(self, key: str) -> int:
        turn = self.turns.get(key, 0)
        self.turns[key] = turn + 1
        return turn


_current: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "eval_call", default=None
)


@contextlib.contextmanager
def call_context(test: str, attempt: int = 0, purpose: str = "agent") -> Iterator[CallContext]:
    """Label the model calls made inside the block (and the tasks it starts)."""
    context = CallContext(test, attempt, purpose)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def current_call() -> CallContext | None:
    return _current.get()


@contextlib.contextmanager
def relabel(purpose: str, attempt: int | None = None) -> Iterator[None]:
    """Give the calls inside the block their own purpose (and turn count) within the current
    test, so calls made concurrently for one test replay deterministically."""
    outer = current_call()
    if outer is None:
        yield
        return
    with call_context(outer.test, outer.attempt if attempt is None else attempt, purpose):
        yield


class ReplayMissing(AgentError):
    """The recording has no completion for this test, attempt and turn."""


class Recording:
    """A JSON-lines recording: one completion per line, keyed by test, attempt, purpose, turn.

    A line may leave out `attempt` to serve every attempt (handy in hand-written files), and
    lines whose first key is `_comment` are notes for people.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[tuple[str, int | None, str, int], dict[str, Any]] = {}
        if not path.exists():
            raise FileNotFoundError(f"recording not found: {path}")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if "_comment" in entry:
                    continue
                key = (
                    entry["test"],
                    entry.get("attempt"),
                    entry.get("purpose", "agent"),
                    int(entry["turn"]),
                )
                completion_from_dict(_completion_fields(entry["completion"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
                raise ValueError(f"{path}:{number}: not a recording entry ({error})") from None
            self.entries[key] = entry

    def lookup(self, test: str, attempt: int, purpose: str, turn: int) -> Completion:
        entry = self.entries.get((test, attempt, purpose, turn)) or self.entries.get(
            (test, None, purpose, turn)
        )
        if entry is None:
            raise ReplayMissing(
                f"recording {self.path.name} has no turn {turn} for test {test!r}, attempt {attempt}, "
                f"purpose {purpose!r}; record it with --record, or add the line by hand"
            )
        return completion_from_dict(_completion_fields(entry["completion"]))


def _completion_fields(data: dict[str, Any]) -> dict[str, Any]:
    """Fill what a hand-written completion may leave out."""
    calls = []
    for i, call in enumerate(data.get("tool_calls") or []):
        arguments = call.get("arguments")
        calls.append(
            {
                "id": call.get("id") or f"call_{i + 1}",
                "name": call["name"],
                "raw_arguments": call.get("raw_arguments") or json.dumps(arguments),
                "arguments": arguments,
            }
        )
    usage = {
        "input_tokens": 0,
        "cached_input_tokens": 0,
        "output_tokens": 0,
        **(data.get("usage") or {}),
    }
    return {
        "text": data.get("text") or "",
        "tool_calls": calls,
        "usage": usage,
        "stop_reason": data.get("stop_reason"),
    }


class ReplayChatModel:
    """Serves recorded completions in order for the current test, attempt and purpose."""

    costs = None  # a replay costs nothing, and nothing is known of the original prices

    def __init__(self, recording: Recording, model_id: str) -> None:
        self.recording = recording
        self.model_id = model_id

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
    ) -> Completion:
        context = current_call()
        if context is None:
            raise ReplayMissing("a replayed model was called outside a test's context")
        turn = context.next_turn(context.purpose)
        return self.recording.lookup(context.test, context.attempt, context.purpose, turn)


class Recorder:
    """Appends completions to a recording file as they happen (thread- and task-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, model_id: str, completion: Completion) -> None:
        context = current_call() or CallContext(test="(unknown)")
        turn = context.next_turn("record:" + context.purpose)
        entry = {
            "test": context.test,
            "attempt": context.attempt,
            "purpose": context.purpose,
            "turn": turn,
            "model": model_id,
            "completion": completion_to_dict(completion),
            "raw": completion.raw,
        }
        line = json.dumps(redact_value(entry), default=str, ensure_ascii=False)
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class RecordingChatModel:
    """A `ChatModel` that passes calls through and records every completion."""

    def __init__(self, model: ChatModel, recorder: Recorder) -> None:
        self.model = model
        self.model_id = model.model_id
        self.costs = model.costs
        self.recorder = recorder

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
    ) -> Completion:
        completion = await self.model.complete(messages, tools=tools, max_tokens=max_tokens)
        self.recorder.write(self.model_id, completion)
        return completion


def recording_name(model_id: str) -> str | None:
    """`replay:demo` → "demo"; None for other model ids."""
    return model_id[len(REPLAY_PREFIX) :] if model_id.startswith(REPLAY_PREFIX) else None

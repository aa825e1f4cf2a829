"""Record and replay: keep the model exchanges of a run, and serve them back offline, deterministically.

Which test, attempt and purpose a completion belongs to travels in a context variable set
by whoever starts the work (the run loop, the grader), so models need not know about tests,
and concurrent runs never mix their turns. That position finds a line; the line's `request`
(a hash of the messages and tools it answered) decides whether it may answer: a replay only
ever answers the request it recorded, so a recorded judge never judges a reply it never saw.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.agents._cache import completion_from_dict, completion_to_dict
from eval_pipeline.agents._errors import AgentError, ReplyTruncated, require_not_cut
from eval_pipeline.agents._types import ChatMessage, Completion, ToolSpec
from eval_pipeline.suite import redact_value

if TYPE_CHECKING:
    from eval_pipeline.agents._chat import ChatModel

REPLAY_PREFIX = "replay:"
REKEY_HINT = (
    "record it again with --record, or, for a hand-written recording, re-key it with "
    "`python benchmarks/rekey_recording.py <suite> <recording>`"
)


def request_hash(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> str:
    """What a recorded completion answered: every message (roles, text, tool calls and
    results) and every tool offered. JSON key order is the only difference it ignores."""
    payload = {"messages": [asdict(m) for m in messages], "tools": [asdict(t) for t in tools]}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    """The recording has no completion for this request (test, attempt, turn and content)."""


Position = tuple[str, int | None, str, int]  # test, attempt (None: every attempt), purpose, turn


class Recording:
    """A JSON-lines recording: one completion per line, found by test, attempt, purpose and
    turn, and served only for the request whose hash the line carries in `request`.

    A line may leave out `attempt` to serve every attempt (handy in hand-written files), and
    lines whose first key is `_comment` are notes for people.

    Args:
        path: the `.jsonl` file.
        rekey: serve lines by position alone and learn each line's request hash, for
            `save_keys` (re-keying a hand-written recording; never for an evaluation).
    """

    def __init__(self, path: Path, *, rekey: bool = False) -> None:
        self.path = path
        self.rekey = rekey
        self.entries: dict[Position, dict[str, Any]] = {}
        self.lines: dict[Position, int] = {}
        self.learned: dict[Position, set[str]] = {}
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
                if not isinstance(entry.get("request", ""), str):
                    raise ValueError("`request` must be a hash string")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
                raise ValueError(f"{path}:{number}: not a recording entry ({error})") from None
            self.entries[key] = entry
            self.lines[key] = number

    def lookup(self, test: str, attempt: int, purpose: str, turn: int, request: str) -> Completion:
        """The completion recorded at this position for exactly this request."""
        position: Position = (test, attempt, purpose, turn)
        if position not in self.entries:
            position = (test, None, purpose, turn)
        entry = self.entries.get(position)
        where = f"turn {turn} of test {test!r}, attempt {attempt}, purpose {purpose!r}"
        if entry is None:
            raise ReplayMissing(
                f"no recording for this request: {self.path.name} has no {where}; {REKEY_HINT}"
            )
        if self.rekey:
            self.learned.setdefault(position, set()).add(request)
        elif entry.get("request") != request:
            reason = (
                "carries no request key"
                if "request" not in entry
                else "was recorded for another request (the messages or tools differ)"
            )
            raise ReplayMissing(
                f"no recording for this request: {self.path.name} line {self.lines[position]} "
                f"({where}) {reason}; {REKEY_HINT}"
            )
        return completion_from_dict(_completion_fields(entry["completion"]))

    def save_keys(self) -> RekeyReport:
        """Write the learned request hashes into the file's lines, leaving everything else
        (comments, order, completions) as it was."""
        conflicts = sorted(
            self.lines[p] for p, requests in self.learned.items() if len(requests) > 1
        )
        keyed = {self.lines[p]: next(iter(r)) for p, r in self.learned.items() if len(r) == 1}
        unused = sorted(n for p, n in self.lines.items() if p not in self.learned)
        out = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if number in keyed:
                entry = json.loads(line)
                completion = entry.pop("completion")
                entry.pop("request", None)
                entry |= {"request": keyed[number], "completion": completion}
                line = json.dumps(entry, ensure_ascii=False)
            out.append(line)
        self.path.write_text("\n".join(out) + "\n", encoding="utf-8")
        return RekeyReport(self.path, len(keyed), unused, conflicts)


@dataclass(frozen=True)
class RekeyReport:
    """What `Recording.save_keys` did: lines keyed, lines no request reached, and lines that
    served attempts asking different things (split them per attempt, then re-key)."""

    path: Path
    keyed: int
    unused_lines: list[int]
    conflicting_lines: list[int]


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
        completion = self.recording.lookup(
            context.test, context.attempt, context.purpose, turn, request_hash(messages, tools)
        )
        # A recorded cut reply replays as the error it was, not as an answer.
        return require_not_cut(self.model_id, completion, max_tokens=None)


class Recorder:
    """Appends completions to a recording file as they happen (thread- and task-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, model_id: str, completion: Completion, request: str) -> None:
        context = current_call() or CallContext(test="(unknown)")
        turn = context.next_turn("record:" + context.purpose)
        entry = {
            "test": context.test,
            "attempt": context.attempt,
            "purpose": context.purpose,
            "turn": turn,
            "request": request,
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
        request = request_hash(messages, tools)
        try:
            completion = await self.model.complete(messages, tools=tools, max_tokens=max_tokens)
        except ReplyTruncated as cut:
            # Kept, so the replay of this run ends in the same error at the same turn.
            self.recorder.write(self.model_id, cut.completion, request)
            raise
        self.recorder.write(self.model_id, completion, request)
        return completion


def recording_name(model_id: str) -> str | None:
    """`replay:demo` → "demo"; None for other model ids."""
    return model_id[len(REPLAY_PREFIX) :] if model_id.startswith(REPLAY_PREFIX) else None

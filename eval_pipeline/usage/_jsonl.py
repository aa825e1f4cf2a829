"""The documented JSONL of production conversations: one conversation per line (docs/usage.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval_pipeline.usage._conversation import Conversation, ToolCall, Turn, UsageProblem, parse_time
from eval_pipeline.usage._privacy import Privacy

__all__ = ["read_jsonl"]

_VOTES = {
    "up": "up",
    "down": "down",
    "+1": "up",
    "-1": "down",
    "positive": "up",
    "negative": "down",
}


class _Bad(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def read_jsonl(
    path: Path, privacy: Privacy, *, source: str = "jsonl"
) -> Iterator[Conversation | UsageProblem]:
    """Each line's conversation, or the problem that line has (its number and field); a
    blank line is skipped, a bad line never stops the others."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except json.JSONDecodeError as error:
                yield UsageProblem(str(path), number, None, f"not JSON ({error.msg})")
                continue
            try:
                yield _conversation(document, privacy, source)
            except _Bad as bad:
                yield UsageProblem(str(path), number, bad.field, str(bad))


def _conversation(document: Any, privacy: Privacy, source: str) -> Conversation:
    if not isinstance(document, dict):
        raise _Bad("", "expected an object per line")
    ident = document.get("conversation_id", document.get("id"))
    if not isinstance(ident, str | int) or isinstance(ident, bool) or not str(ident).strip():
        raise _Bad("conversation_id", "missing: every conversation needs its id")
    messages = document.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Bad("messages", "expected a non-empty list of messages")
    turns = [_turn(m, i, privacy) for i, m in enumerate(messages)]
    started = document.get("started_at") or next((t.at for t in turns if t.at), None)
    if started is None:
        raise _Bad("started_at", "missing: give the conversation's start (or each message's at)")
    try:
        started_at = started if not isinstance(started, str | int | float) else parse_time(started)
    except ValueError as error:
        raise _Bad("started_at", str(error)) from None
    model = document.get("model")
    return Conversation(
        id=str(ident).strip(),
        source=source,
        started_at=started_at,
        turns=tuple(turns),
        user=privacy.pseudonym(document.get("user") or document.get("user_id")),
        model=str(model) if model else None,
    )


def _turn(message: Any, index: int, privacy: Privacy) -> Turn:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _Bad(where, "expected an object")
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise _Bad(f"{where}.role", f"expected user or assistant, got {role!r}")
    text = message.get("content", message.get("text")) or ""
    if not isinstance(text, str):
        raise _Bad(f"{where}.content", "expected text")
    at = None
    if message.get("at") is not None:
        try:
            at = parse_time(message["at"])
        except ValueError as error:
            raise _Bad(f"{where}.at", str(error)) from None
    vote = message.get("feedback")
    if vote is not None and str(vote).lower() not in _VOTES:
        raise _Bad(f"{where}.feedback", f"expected up or down, got {vote!r}")
    calls = []
    for j, call in enumerate(message.get("tool_calls") or ()):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise _Bad(f"{where}.tool_calls[{j}].name", "expected the tool's name")
        arguments = call.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = {"input": arguments}
        calls.append(
            ToolCall(
                call["name"],
                privacy.masked(arguments),
                _text(call.get("result"), privacy),
                _text(call.get("error"), privacy),
            )
        )
    comment = message.get("feedback_comment")
    return Turn(
        role=role,
        text=privacy.text(text),
        at=at,
        tool_calls=tuple(calls),
        feedback=_VOTES[str(vote).lower()] if vote is not None else None,  # type: ignore[arg-type]
        feedback_comment=privacy.text(comment) if isinstance(comment, str) else None,
        regenerated=bool(message.get("regenerated")),
    )


def _text(value: Any, privacy: Privacy) -> str | None:
    if value is None:
        return None
    return privacy.text(value if isinstance(value, str) else json.dumps(value, default=str))

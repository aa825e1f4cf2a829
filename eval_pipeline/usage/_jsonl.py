"""The documented JSONL of production conversations: one conversation per line (docs/usage.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval_pipeline.usage._conversation import (
    Conversation,
    ToolCall,
    Turn,
    UsageProblem,
    json_lines,
    parse_time,
)
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
    def __init__(self, field: str, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.line = line


def read_jsonl(
    path: Path, privacy: Privacy, *, source: str = "jsonl"
) -> Iterator[Conversation | UsageProblem]:
    """Each line's conversation, or the problem that line has (its number and field); a
    blank line is skipped, a bad line never stops the others. A line holding one exchange of
    the agent protocol (`request` and `reply`) is gathered with the other exchanges of its
    conversation, which is yielded once the file is read."""
    exchanges: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    with path.open(encoding="utf-8", errors="replace") as lines:
        for item in json_lines(path, lines):
            if isinstance(item, UsageProblem):
                yield item
                continue
            number, document = item
            try:
                if isinstance(document, dict) and "request" in document:
                    exchanges.setdefault(_ident(document), []).append((number, document))
                    continue
                yield _conversation(document, privacy, source)
            except _Bad as bad:
                yield UsageProblem(str(path), number, bad.field, str(bad))
    for ident, lines_of in exchanges.items():
        try:
            yield _from_exchanges(ident, lines_of, privacy, source)
        except _Bad as bad:
            yield UsageProblem(str(path), bad.line, bad.field, str(bad))


def _ident(document: dict[str, Any]) -> str:
    ident = document.get("conversation_id", document.get("id"))
    if not isinstance(ident, str | int) or isinstance(ident, bool) or not str(ident).strip():
        raise _Bad("conversation_id", "missing: every conversation needs its id")
    return str(ident).strip()


def _from_exchanges(
    ident: str, lines: list[tuple[int, dict[str, Any]]], privacy: Privacy, source: str
) -> Conversation:
    """One conversation from its exchanges of the agent protocol, in the order of their `at`
    (else of their lines): each request's messages past those seen before (the user's new
    question), then its reply as the agent's turn, with its tool calls, its queries that
    failed, and the vote on it."""
    turns: list[Turn] = []
    seen = 0
    first_at = None
    user = model = None
    for number, document in sorted(lines, key=lambda item: (str(item[1].get("at") or ""), item[0])):
        request, reply = document.get("request"), document.get("reply")
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not messages:
            raise _Bad("request.messages", "expected the request's list of messages", number)
        if not isinstance(reply, dict) or not isinstance(reply.get("text", ""), str):
            raise _Bad("reply.text", "expected the reply of the agent protocol (its text)", number)
        try:
            at = parse_time(document["at"]) if document.get("at") is not None else None
        except ValueError as error:
            raise _Bad("at", str(error), number) from None
        first_at = first_at or at
        user = user or document.get("user") or document.get("user_id")
        model = model or document.get("model")
        for index, message in enumerate(messages[seen:], start=seen):
            try:
                turns.append(_turn(message, index, privacy))
            except _Bad as bad:
                raise _Bad(f"request.{bad.field}", str(bad), number) from None
        calls = list(reply.get("tool_calls") or [])
        for query in reply.get("queries") or ():
            if isinstance(query, dict) and query.get("error"):
                calls.append(
                    {
                        "name": "execute_sql",
                        "arguments": {"sql": query.get("sql")},
                        "error": query["error"],
                    }
                )
        answer = {
            "role": "assistant",
            "content": reply.get("text") or "",
            "tool_calls": calls,
            **{
                k: document[k]
                for k in ("feedback", "feedback_comment", "regenerated")
                if k in document
            },
        }
        try:
            turns.append(_turn(answer, len(messages), privacy))
        except _Bad as bad:
            raise _Bad(f"reply.{bad.field}", str(bad), number) from None
        seen = len(messages) + 1
    if first_at is None:
        raise _Bad("at", "missing: give each exchange's time", lines[0][0])
    return Conversation(
        id=ident,
        source=source,
        started_at=first_at,
        turns=tuple(turns),
        user=privacy.pseudonym(user),
        model=str(model) if model else None,
    )


def _conversation(document: Any, privacy: Privacy, source: str) -> Conversation:
    if not isinstance(document, dict):
        raise _Bad("", "expected an object per line")
    ident = _ident(document)
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
        id=ident,
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

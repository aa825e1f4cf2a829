"""OpenTelemetry GenAI traces in OTLP/JSON, as a collector's file exporter writes them (one export request per line), read into conversations.

What is read of the GenAI semantic conventions: spans grouped by `gen_ai.conversation.id`
(on the span or its resource); the user's messages from a `chat` or `invoke_agent` span's
`gen_ai.input.messages` (its last user message), the agent's answer from its
`gen_ai.output.messages` (text parts); each `execute_tool` span as a tool call of the answer
in progress (`gen_ai.tool.name`, `gen_ai.tool.call.arguments` / `.result`, an error from
`error.type` or an ERROR status); `gen_ai.evaluation.result` events as the user's vote on the
answer before them (a score label or value); `gen_ai.request.model` as the model; `user.id` or
`enduser.id` as the user (stored as a pseudonym). Other attributes are not kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.usage._conversation import (
    Conversation,
    ToolCall,
    Turn,
    UsageProblem,
    json_lines,
)
from eval_pipeline.usage._privacy import Privacy

__all__ = ["read_otlp"]

_STATUS_ERROR = 2
_NEGATIVE = {"negative", "thumbs_down", "thumbsdown", "down", "bad", "dislike", "incorrect", "-1"}
_POSITIVE = {"positive", "thumbs_up", "thumbsup", "up", "good", "like", "correct", "+1", "1"}


@dataclass
class _Span:
    trace: str
    start: int
    operation: str
    attributes: dict[str, Any]
    events: list[tuple[int, str, dict[str, Any]]]
    error: str | None


@dataclass
class _Thread:
    spans: list[_Span] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_otlp(path: Path, privacy: Privacy) -> Iterator[Conversation | UsageProblem]:
    """The conversations of an OTLP/JSON file (JSON lines of export requests, or one
    request), then a problem per line or span that could not be read: a bad line or span
    never stops the others. A GenAI span with no conversation id is named and left out."""
    threads: dict[str, _Thread] = {}
    problems: list[UsageProblem] = []
    for number, request in _requests(path, problems):
        for resource in _list(request, "resourceSpans"):
            base = _attributes(resource.get("resource", {}).get("attributes"))
            for scope in _list(resource, "scopeSpans"):
                for index, raw in enumerate(_list(scope, "spans")):
                    try:
                        span = _span(raw, base)
                    except (KeyError, TypeError, ValueError) as error:
                        problems.append(
                            UsageProblem(str(path), number, f"spans[{index}]", _why(error))
                        )
                        continue
                    if not span.operation:
                        continue  # not a GenAI span: another library's
                    ident = span.attributes.get("gen_ai.conversation.id")
                    if ident is None or not str(ident).strip():
                        problems.append(
                            UsageProblem(
                                str(path),
                                number,
                                f"spans[{index}].attributes.gen_ai.conversation.id",
                                f"missing on a {span.operation} span; the span is left out",
                            )
                        )
                        continue
                    threads.setdefault(str(ident), _Thread()).spans.append(span)
    for ident, thread in threads.items():
        conversation = _conversation(ident, thread.spans, privacy)
        if conversation is not None:
            yield conversation
    yield from problems


def _requests(path: Path, problems: list[UsageProblem]) -> Iterator[tuple[int, dict[str, Any]]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    stripped = text.strip()
    if stripped.startswith("{") and "\n" not in stripped:
        lines = [stripped]
    else:
        try:  # one request written over several lines
            whole = json.loads(stripped)
            if isinstance(whole, dict):
                yield 1, whole
                return
        except json.JSONDecodeError:
            pass
        lines = text.splitlines()
    for item in json_lines(path, lines):
        if isinstance(item, UsageProblem):
            problems.append(item)
            continue
        number, request = item
        if not isinstance(request, dict):
            problems.append(UsageProblem(str(path), number, None, "expected an export request"))
            continue
        yield number, request


def _list(document: Any, key: str) -> list[Any]:
    value = document.get(key) if isinstance(document, dict) else None
    return value if isinstance(value, list) else []


def _why(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing {error.args[0]}"
    return str(error) or type(error).__name__


def _value(any_value: Any) -> Any:
    """An OTLP AnyValue as Python."""
    if not isinstance(any_value, dict):
        return any_value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in any_value:
            return any_value[key]
    if "intValue" in any_value:
        return int(any_value["intValue"])
    if "arrayValue" in any_value:
        return [_value(v) for v in any_value["arrayValue"].get("values") or ()]
    if "kvlistValue" in any_value:
        return _attributes(any_value["kvlistValue"].get("values"))
    return None


def _attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {
        item["key"]: _value(item.get("value"))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def _span(raw: dict[str, Any], base: dict[str, Any]) -> _Span:
    if not isinstance(raw, dict):
        raise TypeError("expected a span object")
    attributes = {**base, **_attributes(raw.get("attributes"))}
    start = int(raw["startTimeUnixNano"])
    status = raw.get("status") or {}
    error = attributes.get("error.type")
    if status.get("code") in (_STATUS_ERROR, "STATUS_CODE_ERROR"):
        error = status.get("message") or error or "error"
    events = [
        (int(e.get("timeUnixNano") or start), str(e.get("name")), _attributes(e.get("attributes")))
        for e in raw.get("events") or ()
        if isinstance(e, dict)
    ]
    return _Span(
        trace=str(raw.get("traceId") or ""),
        start=start,
        operation=str(attributes.get("gen_ai.operation.name") or ""),
        attributes=attributes,
        events=events,
        error=str(error) if error else None,
    )


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [{"role": "user", "parts": [{"type": "text", "content": value}]}]
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else []


def _text_of(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        return "\n".join(
            str(p.get("content") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text"
        ).strip()
    content = message.get("content")
    return content.strip() if isinstance(content, str) else ""


def _vote(attributes: dict[str, Any]) -> str | None:
    label = attributes.get("gen_ai.evaluation.score.label")
    if isinstance(label, str) and label.strip().lower() in _NEGATIVE:
        return "down"
    if isinstance(label, str) and label.strip().lower() in _POSITIVE:
        return "up"
    score = attributes.get("gen_ai.evaluation.score.value")
    if isinstance(score, int | float) and not isinstance(score, bool):
        return "up" if score > 0 else "down"
    return None


def _conversation(ident: str, spans: list[_Span], privacy: Privacy) -> Conversation | None:
    spans.sort(key=lambda s: s.start)
    turns: list[Turn] = []
    calls: list[ToolCall] = []
    last_user = None
    user = model = None
    votes: list[tuple[int, str, str | None]] = []
    answer_times: list[int] = []
    for span in spans:
        attributes = span.attributes
        user = user or attributes.get("user.id") or attributes.get("enduser.id")
        model = model or attributes.get("gen_ai.request.model")
        for at, name, event in span.events:
            if name == "gen_ai.evaluation.result" and (vote := _vote(event)) is not None:
                votes.append((at, vote, event.get("gen_ai.evaluation.explanation")))
        if span.operation == "execute_tool":
            arguments = attributes.get("gen_ai.tool.call.arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except json.JSONDecodeError:
                    arguments = {"input": arguments}
            result = attributes.get("gen_ai.tool.call.result")
            calls.append(
                ToolCall(
                    str(attributes.get("gen_ai.tool.name") or "tool"),
                    privacy.masked(arguments if isinstance(arguments, dict) else {}),
                    privacy.text(result if isinstance(result, str) else json.dumps(result))
                    if result is not None
                    else None,
                    privacy.text(span.error) if span.error else None,
                )
            )
            continue
        if span.operation not in ("chat", "invoke_agent", "text_completion"):
            continue
        inputs = [
            m for m in _messages(attributes.get("gen_ai.input.messages")) if m.get("role") == "user"
        ]
        if inputs:
            asked = _text_of(inputs[-1])
            if asked and asked != last_user:
                turns.append(Turn("user", privacy.text(asked), _time(span.start)))
                last_user = asked
        outputs = [
            m
            for m in _messages(attributes.get("gen_ai.output.messages"))
            if m.get("role") == "assistant"
        ]
        answer = "\n".join(t for t in (_text_of(m) for m in outputs) if t)
        if answer:
            turns.append(Turn("assistant", privacy.text(answer), _time(span.start), tuple(calls)))
            answer_times.append(span.start)
            calls = []
    if calls:  # tool calls with no answer after them: the agent stopped
        turns.append(Turn("assistant", "", None, tuple(calls)))
        answer_times.append(spans[-1].start)
    if not turns:
        return None
    turns = _with_votes(turns, answer_times, votes, privacy)
    return Conversation(
        id=ident,
        source="otel",
        started_at=_time(spans[0].start),
        turns=tuple(turns),
        user=privacy.pseudonym(str(user)) if user else None,
        model=str(model) if model else None,
    )


def _with_votes(
    turns: list[Turn],
    answer_times: list[int],
    votes: list[tuple[int, str, str | None]],
    privacy: Privacy,
) -> list[Turn]:
    """Each vote on the last answer given before it (or the first, for a vote that came
    with it)."""
    answers = [i for i, t in enumerate(turns) if t.role == "assistant"]
    voted = list(turns)
    for at, vote, comment in votes:
        before = [k for k, time in enumerate(answer_times) if time <= at]
        k = before[-1] if before else 0
        if k >= len(answers):
            continue
        i = answers[k]
        voted[i] = Turn(
            voted[i].role,
            voted[i].text,
            voted[i].at,
            voted[i].tool_calls,
            vote,  # type: ignore[arg-type]
            privacy.text(comment) if isinstance(comment, str) else None,
            voted[i].regenerated,
        )
    return voted


def _time(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos / 1e9, UTC)

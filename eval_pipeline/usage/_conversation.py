"""A production conversation as every source is read into: who asked (a pseudonym), what, what the agent answered and did, and what the user thought of it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

__all__ = ["Conversation", "ToolCall", "Turn", "UsageProblem", "json_lines", "parse_time"]

Role = Literal["user", "assistant"]
Vote = Literal["up", "down"]


@dataclass(frozen=True)
class UsageProblem:
    """One record that could not be read: where it is and what is wrong with it."""

    source: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {what}{self.message}"


@dataclass(frozen=True)
class ToolCall:
    """A tool the agent called in an answer: its arguments, and what it returned or the error."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str | None = None
    error: str | None = None

    @property
    def sql(self) -> str | None:
        """The SQL the call ran, where its arguments hold one."""
        for key in ("sql", "sql_query", "query", "statement"):
            value = self.arguments.get(key)
            if isinstance(value, str) and value.strip():
                return value
        return None


@dataclass(frozen=True)
class Turn:
    """One message: a user's question or follow-up, or the agent's answer with its tool calls
    and the user's vote on it (`feedback`)."""

    role: Role
    text: str
    at: datetime | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    feedback: Vote | None = None
    feedback_comment: str | None = None
    #: The user asked for this answer again (a regeneration).
    regenerated: bool = False

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.at is not None:
            document["at"] = self.at.isoformat()
        if self.tool_calls:
            document["tool_calls"] = [
                {"name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}
                for c in self.tool_calls
            ]
        if self.feedback is not None:
            document["feedback"] = self.feedback
        if self.feedback_comment:
            document["feedback_comment"] = self.feedback_comment
        if self.regenerated:
            document["regenerated"] = True
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Turn:
        return cls(
            role=document["role"],
            text=document.get("text") or "",
            at=parse_time(document["at"]) if document.get("at") else None,
            tool_calls=tuple(
                ToolCall(c["name"], c.get("arguments") or {}, c.get("result"), c.get("error"))
                for c in document.get("tool_calls") or ()
            ),
            feedback=document.get("feedback"),
            feedback_comment=document.get("feedback_comment"),
            regenerated=bool(document.get("regenerated")),
        )


@dataclass(frozen=True)
class Conversation:
    """A production conversation, as stored in `usage_conversations` (one row each)."""

    id: str
    source: str
    started_at: datetime
    turns: tuple[Turn, ...]
    #: A pseudonym of the user (a keyed hash of their id), never the id itself.
    user: str | None = None
    model: str | None = None

    @property
    def day(self) -> date:
        return self.started_at.astimezone(UTC).date()

    @property
    def question(self) -> str:
        """The first thing the user asked."""
        return next((t.text for t in self.turns if t.role == "user" and t.text.strip()), "")

    def to_row(self) -> dict[str, Any]:
        turns = [t.to_json() for t in self.turns]
        text = json.dumps(turns, sort_keys=True, ensure_ascii=False)
        return {
            "conversation_id": self.id,
            "source": self.source,
            "run_date": self.day,
            "started_at": self.started_at.astimezone(UTC),
            "user_key": self.user,
            "model": self.model,
            "question": self.question,
            "turns": text,
            "content_hash": hashlib.sha256(text.encode()).hexdigest()[:16],
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Conversation:
        turns = row["turns"]
        if isinstance(turns, str):
            turns = json.loads(turns)
        started = row["started_at"]
        if started.tzinfo is None:
            started = started.replace(tzinfo=UTC)
        return cls(
            id=row["conversation_id"],
            source=row["source"],
            started_at=started,
            turns=tuple(Turn.from_json(t) for t in turns),
            user=row.get("user_key"),
            model=row.get("model"),
        )


def parse_time(value: Any) -> datetime:
    """An ISO 8601 text or epoch seconds as an aware datetime (naive read as UTC).

    Raises:
        ValueError: neither.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), UTC)
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 time, got {type(value).__name__}")
    parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def json_lines(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, Any] | UsageProblem]:
    """Each non-blank line's JSON value with its line number, or the problem of a line that
    is not JSON (a truncated last line, say): one bad line never stops the others."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            yield UsageProblem(str(path), number, None, f"not JSON ({error.msg})")

"""Friction in production conversations, found without a model and explained: tool errors, negative feedback, corrections and regenerations, no answer, the same question answered differently on different days, questions no test asks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from eval_pipeline.suite import Case
from eval_pipeline.usage._conversation import Conversation, Turn
from eval_pipeline.usage._words import (
    WordGroups,
    error_shape,
    numbers_in,
    overlap,
    tables_in,
    words,
)

__all__ = [
    "COVERED_AT",
    "SIGNAL_KINDS",
    "Signal",
    "SignalKind",
    "is_correction",
    "prompts_of",
    "signals_of",
]

SignalKind = Literal[
    "tool_error", "negative_feedback", "correction", "inconsistent", "uncovered", "no_answer"
]
SIGNAL_KINDS: tuple[SignalKind, ...] = (
    "tool_error",
    "negative_feedback",
    "correction",
    "inconsistent",
    "uncovered",
    "no_answer",
)

#: A question at least this alike a test's prompt (`words.overlap`) is covered by that test.
COVERED_AT = 0.5
#: A follow-up at least this alike the question before it asks it again (a rephrase).
_REPHRASED_AT = 0.6
_REGENERATED = "the user had the answer regenerated"
#: Questions at least this alike are the same question (inconsistency across days).
_SAME_QUESTION_AT = 0.8

_CORRECTION = re.compile(
    r"(\b(that'?s|this is|it'?s|you'?re|the answer is|answer is)\s+(wrong|incorrect|not (right|correct))"
    r"|^\s*(no|nope)\b[,.!]"
    r"|\b(wrong|incorrect|inaccurate)\b"
    r"|\bshould (be|have been)\b"
    r"|\byou (forgot|missed|ignored|excluded|included|used the wrong)\b"
    r"|\bnot what i (asked|meant)\b"
    r"|\bdoes(n'?t| not) (look|seem|add up|match)\b"
    r"|\bthat can'?t be right\b)",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"(\b(i|we) (can'?t|cannot|am unable to|'m unable to|am not able to|'m not able to)\b"
    r"|\b(i|we) (do not|don'?t) have (access|the data|enough|information)\b"
    r"|\bno (data|information) (is )?available\b"
    r"|\bunable to (answer|find|determine|compute)\b"
    r"|\b(i|we) (do not|don'?t) know\b"
    r"|\bnot (able|possible) to (answer|determine)\b)",
    re.IGNORECASE,
)
# A question whose answer may rightly change from day to day.
_RELATIVE_TIME = re.compile(
    r"\b(today|yesterday|tomorrow|now|current(ly)?|latest|recent(ly)?|so far|to date"
    r"|this (week|month|quarter|year)|last (\d+ )?(days?|weeks?|months?|quarters?|years?)"
    r"|past (\d+ )?(days?|weeks?|months?)|ytd|mtd|wtd)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Signal:
    """One piece of friction in one conversation: its kind, the turn it was found at, what
    the SQL of that answer touched, the error, and why it counts (`detail`)."""

    conversation_id: str
    day: date
    kind: SignalKind
    turn: int
    user: str | None
    model: str | None
    question: str
    tables: tuple[str, ...] = ()
    error: str | None = None
    detail: str = ""

    def to_row(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "run_date": self.day,
            "kind": self.kind,
            "turn": self.turn,
            "user_key": self.user,
            "model": self.model,
            "question": self.question,
            "tables": list(self.tables),
            "error": self.error,
            "detail": self.detail,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Signal:
        return cls(
            conversation_id=row["conversation_id"],
            day=row["run_date"],
            kind=row["kind"],
            turn=int(row["turn"]),
            user=row.get("user_key"),
            model=row.get("model"),
            question=row.get("question") or "",
            tables=tuple(row.get("tables") or ()),
            error=row.get("error"),
            detail=row.get("detail") or "",
        )


def signals_of(conversations: Sequence[Conversation], prompts: Sequence[str]) -> list[Signal]:
    """Every signal in `conversations`: those of each conversation on its own, then
    `inconsistent` (the same question, with no relative time in it, answered with other
    figures on another day) and `uncovered` (a first question no test's prompt in `prompts`
    asks, by `words.overlap` under `COVERED_AT`, in a conversation with no other signal)."""
    found: list[Signal] = []
    for conversation in conversations:
        found += _own_signals(conversation)
    found += _inconsistent(conversations)
    # A question that met friction is recommended for that friction (and promoted from it);
    # `uncovered` is for the ones that went well with no test to keep them so.
    met = {signal.conversation_id for signal in found}
    found += _uncovered([c for c in conversations if c.id not in met], prompts)
    return found


def prompts_of(cases: Iterable[Case]) -> list[str]:
    """What the suite's tests ask: the prompts a question is `uncovered` against."""
    return [case.prompt for case in cases if case.prompt]


def worded_correction(signal: Signal, conversation: Conversation) -> tuple[str, str] | None:
    """(the answer, the user's next message) of a correction found in the user's words (a
    judge may confirm it); None for any other signal, a regenerated answer included: the
    user pressed the button, nothing is left to read."""
    if signal.kind != "correction" or signal.detail == _REGENERATED:
        return None
    turns = conversation.turns
    if not 0 <= signal.turn < len(turns):
        return None
    after = next((t for t in turns[signal.turn + 1 :] if t.role == "user"), None)
    if after is None:
        return None
    return turns[signal.turn].text, after.text


def is_correction(text: str) -> bool:
    """Whether a user's follow-up says the answer before it was wrong."""
    return _CORRECTION.search(text) is not None


def _signal(conversation: Conversation, kind: SignalKind, turn: int, **fields: Any) -> Signal:
    return Signal(
        conversation_id=conversation.id,
        day=conversation.day,
        kind=kind,
        turn=turn,
        user=conversation.user,
        model=conversation.model,
        question=_asked_before(conversation.turns, turn),
        **fields,
    )


def _asked_before(turns: Sequence[Turn], index: int) -> str:
    for turn in reversed(turns[: index + 1]):
        if turn.role == "user" and turn.text.strip():
            return turn.text
    return ""


def _answer_tables(turn: Turn) -> tuple[str, ...]:
    found: list[str] = []
    for call in turn.tool_calls:
        found += [t for t in tables_in(call.sql) if t not in found]
    return tuple(found)


def _own_signals(conversation: Conversation) -> list[Signal]:
    found: list[Signal] = []
    turns = conversation.turns
    last_question: frozenset[str] | None = None
    last_answer: int | None = None
    for index, turn in enumerate(turns):
        if turn.role == "user":
            asked = words(turn.text)
            if last_answer is not None:
                answer = turns[last_answer]
                tables = _answer_tables(answer)
                if is_correction(turn.text):
                    found.append(
                        _signal(
                            conversation,
                            "correction",
                            last_answer,
                            tables=tables,
                            detail=f"the user corrected the answer: {_clip(turn.text)}",
                        )
                    )
                elif last_question and overlap(asked, last_question) >= _REPHRASED_AT:
                    found.append(
                        _signal(
                            conversation,
                            "correction",
                            last_answer,
                            tables=tables,
                            detail=f"the user asked again in other words: {_clip(turn.text)}",
                        )
                    )
            last_question = asked
            continue
        tables = _answer_tables(turn)
        for call in turn.tool_calls:
            if call.error:
                found.append(
                    _signal(
                        conversation,
                        "tool_error",
                        index,
                        tables=tables_in(call.sql) or tables,
                        error=error_shape(call.error),
                        detail=f"{call.name} failed: {_clip(call.error)}",
                    )
                )
        if turn.feedback == "down":
            comment = f": {_clip(turn.feedback_comment)}" if turn.feedback_comment else ""
            found.append(
                _signal(
                    conversation,
                    "negative_feedback",
                    index,
                    tables=tables,
                    detail=f"the user voted the answer down{comment}",
                )
            )
        if turn.regenerated:
            found.append(
                _signal(
                    conversation,
                    "correction",
                    index,
                    tables=tables,
                    detail=_REGENERATED,
                )
            )
        last_answer = index
    final = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "assistant"), None)
    if final is None or not turns[final].text.strip():
        found.append(
            _signal(
                conversation,
                "no_answer",
                final if final is not None else len(turns) - 1,
                detail="the agent gave no answer",
            )
        )
    elif _REFUSAL.search(turns[final].text):
        found.append(
            _signal(
                conversation,
                "no_answer",
                final,
                tables=_answer_tables(turns[final]),
                detail=f"the agent could not answer: {_clip(turns[final].text)}",
            )
        )
    return found


def _inconsistent(conversations: Sequence[Conversation]) -> list[Signal]:
    """The same question (alike by `_SAME_QUESTION_AT`, no relative time in it) whose first
    answers state other figures on different days: one signal per conversation of the days
    that disagree with the most common figures."""
    grouping = WordGroups(_SAME_QUESTION_AT)
    groups: list[list[tuple[Conversation, int, tuple[str, ...]]]] = []
    for conversation in conversations:
        question = conversation.question
        if not question or _RELATIVE_TIME.search(question):
            continue
        answer = next(
            (i for i, t in enumerate(conversation.turns) if t.role == "assistant" and t.text), None
        )
        if answer is None:
            continue
        # The figures the answer gives, not those it repeats from the question (its year).
        asked_figures = set(numbers_in(question))
        figures = tuple(
            f for f in numbers_in(conversation.turns[answer].text) if f not in asked_figures
        )
        if not figures:
            continue
        group = grouping.place(words(question))
        if group == len(groups):
            groups.append([])
        groups[group].append((conversation, answer, figures))
    found: list[Signal] = []
    for members in groups:
        days = {c.day for c, _, _ in members}
        answers = {figures for _, _, figures in members}
        if len(days) < 2 or len(answers) < 2:
            continue
        counts: dict[tuple[str, ...], int] = {}
        for _, _, figures in members:
            counts[figures] = counts.get(figures, 0) + 1
        usual = max(counts, key=lambda f: (counts[f], f))
        shown = ", ".join(sorted({" ".join(f) for f in answers})[:4])
        for conversation, answer, figures in members:
            found.append(
                _signal(
                    conversation,
                    "inconsistent",
                    answer,
                    tables=_answer_tables(conversation.turns[answer]),
                    detail=f"asked on {len(days)} days, answered with {len(answers)} different "
                    f"figures ({shown})"
                    + ("" if figures == usual else "; this answer differs from the usual one"),
                )
            )
    return found


def _uncovered(conversations: Sequence[Conversation], prompts: Sequence[str]) -> list[Signal]:
    tests = WordGroups(COVERED_AT)
    for prompt in prompts:
        tests.add(words(prompt))  # each prompt apart, however alike two are
    found: list[Signal] = []
    for conversation in conversations:
        question = conversation.question
        if not question:
            continue
        _, best = tests.best(words(question))
        if best >= COVERED_AT:
            continue
        first = next((i for i, t in enumerate(conversation.turns) if t.role == "user"), 0)
        found.append(
            _signal(
                conversation,
                "uncovered",
                first,
                detail=f"no test asks this (closest prompt {best:.0%} alike)",
            )
        )
    return found


def _clip(text: str | None, most: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= most else text[: most - 1] + "…"

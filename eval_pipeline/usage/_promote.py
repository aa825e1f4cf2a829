"""A test drawn from production: the user's question as its prompt and, as its reference SQL, the query behind the answer the user accepted; written under `cases/` only when asked, never over a file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from eval_pipeline.usage._conversation import Conversation, Turn
from eval_pipeline.usage._signals import is_correction

__all__ = ["TestDraft", "draft_test", "write_draft"]

_NAME = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class TestDraft:
    """A test file's text, the name it would have, and where its reference came from (None:
    it needs one written by hand)."""

    name: str
    text: str
    reference_from: str | None


def draft_test(
    conversations: Sequence[Conversation], *, name: str | None = None, origin: str = ""
) -> TestDraft:
    """The draft from the first of `conversations` that has an accepted answer's query (the
    answer voted up, else the answer after the user's correction, else an answer that met
    no friction); else from the first, its reference marked as needed."""
    chosen, turn = None, None
    for conversation in conversations:
        turn = _accepted(conversation)
        if turn is not None:
            chosen = conversation
            break
    chosen = chosen or conversations[0]
    question = chosen.question
    sql = _last_sql(chosen.turns[turn]) if turn is not None else None
    test_name = name or _name_of(question)
    document: dict[str, object] = {"name": test_name, "prompt": question}
    if sql:
        document["sql"] = sql.strip() + "\n"
    document["tags"] = ["from-production"] + ([] if sql else ["needs-reference"])
    source = f"conversation {chosen.id} ({chosen.source}, {chosen.day.isoformat()})"
    document["notes"] = f"Drawn from {source}{f' for {origin}' if origin else ''}." + (
        "" if sql else " Write the reference SQL (`sql:`) before relying on this test."
    )
    header = "# Drawn from production usage by `eval-pipeline promote`.\n" + (
        "" if sql else "# needs a reference: no answer the user accepted ran a query.\n"
    )
    text = header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    return TestDraft(test_name, text, source if sql else None)


def write_draft(draft: TestDraft, cases: Path) -> Path:
    """Write the draft as `cases/<name>.yml`; never over an existing file.

    Raises:
        FileExistsError: the file exists (choose another name with --name).
    """
    cases.mkdir(parents=True, exist_ok=True)
    path = cases / f"{draft.name}.yml"
    with path.open("x", encoding="utf-8") as file:
        file.write(draft.text)
    return path


def _accepted(conversation: Conversation) -> int | None:
    """The answer the user accepted, with a query behind it."""
    turns = conversation.turns
    answers = [i for i, t in enumerate(turns) if t.role == "assistant" and _last_sql(t)]
    for i in answers:
        if turns[i].feedback == "up":
            return i
    corrected = [
        i for i, t in enumerate(turns) if t.role == "user" and is_correction(t.text) and i > 0
    ]
    if corrected:
        after = [i for i in answers if i > corrected[-1]]
        if after and turns[after[0]].feedback != "down":
            return after[0]
        return None
    clean = [
        i
        for i in answers
        if turns[i].feedback != "down"
        and not turns[i].regenerated
        and not any(c.error for c in turns[i].tool_calls)
    ]
    return clean[-1] if clean else None


def _last_sql(turn: Turn) -> str | None:
    queries = [c.sql for c in turn.tool_calls if c.sql and not c.error]
    return queries[-1] if queries else None


def _name_of(question: str) -> str:
    slug = _NAME.sub("_", question.lower()).strip("_")
    return ("prod_" + slug[:48]).rstrip("_") or "prod_question"

"""Recommendations: the signals grouped into clusters (the same table and error, the same table's answers, the same question), ranked by impact, each naming the context file to change and what is missing, with the conversations it came from and its stored status."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.usage._signals import Signal, SignalKind
from eval_pipeline.usage._words import WordGroups, mentioned, words

__all__ = ["ContextFiles", "Recommendation", "recommend"]

#: How much a conversation of each kind weighs: what a user met, from an answer they said
#: was wrong to a question no test asks yet.
SEVERITY: dict[SignalKind, float] = {
    "negative_feedback": 1.5,
    "inconsistent": 1.4,
    "correction": 1.3,
    "tool_error": 1.0,
    "no_answer": 1.0,
    "uncovered": 0.5,
}
#: A conversation's weight halves every this many days before the latest day.
HALF_LIFE_DAYS = 14.0
#: Questions at least this alike (`words.overlap`) are one cluster where no table groups them.
_SAME_TOPIC_AT = 0.5
#: Where a test is added, for a question no test asks.
TESTS_FOLDER = "cases/"
FALLBACK_FILE = "RULES.md"


@dataclass(frozen=True)
class Recommendation:
    """One cluster of friction: what to change where, how much it matters, and where it
    was seen."""

    id: str
    kind: SignalKind
    score: float
    file: str
    summary: str
    conversations: tuple[str, ...]
    users: int
    tables: tuple[str, ...]
    error: str | None
    first_seen: date
    last_seen: date
    examples: tuple[str, ...]
    status: str = "new"
    note: str | None = None
    #: Who wrote `summary`: `rules` (this module), or the judge model that summed it up.
    summarized_by: str = "rules"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "score": self.score,
            "file": self.file,
            "summary": self.summary,
            "conversations": list(self.conversations),
            "users": self.users,
            "tables": list(self.tables),
            "error": self.error,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "examples": list(self.examples),
            "status": self.status,
            "note": self.note,
            "summarized_by": self.summarized_by,
        }


@dataclass(frozen=True)
class ContextFiles:
    """The agent's context files of a suite (nao's layout: `RULES.md`, `semantics/`,
    `databases/`, `docs/`, `repos/`), by path relative to the suite, with their text (the
    first 200,000 characters) for finding which one speaks of a table or a topic."""

    texts: Mapping[str, str]

    @classmethod
    def of_folder(cls, root: Path) -> ContextFiles:
        texts: dict[str, str] = {}
        rules = root / FALLBACK_FILE
        if rules.is_file():
            texts[FALLBACK_FILE] = _head(rules)
        for folder in ("semantics", "databases", "docs", "repos"):
            base = root / folder
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                if path.is_file() and path.suffix.lower() in (".md", ".yml", ".yaml", ".txt"):
                    texts[path.relative_to(root).as_posix()] = _head(path)
        return cls(texts)

    def for_table(self, table: str, *, prefer: str = "columns") -> str | None:
        """The file describing `table`: one in a folder named after it (nao's synced
        `databases/…/table=<name>/`, `<name>/`), `prefer` first; else a semantics or docs file
        naming it."""
        own = [
            path
            for path in self.texts
            if any(
                part == table or part.endswith(f"={table}") or Path(part).stem == table
                for part in [*path.split("/")[:-1], Path(path).stem]
            )
        ]
        if own:
            return min(own, key=lambda p: (prefer not in Path(p).stem, len(p), p))
        return self.for_topic({table}, folders=("semantics/", "docs/"))

    def for_topic(
        self, topic: frozenset[str] | set[str], *, folders: Sequence[str] = ("semantics/", "docs/")
    ) -> str | None:
        """The file of `folders` naming most of the topic's words, at least two of them (one
        word in common, "month" say, is chance); None when none does."""
        best, best_count = None, 1
        for path, text in self.texts.items():
            if not path.startswith(tuple(folders)):
                continue
            count = len(mentioned(sorted(topic), text))
            if count > best_count:
                best, best_count = path, count
        return best


def _head(path: Path) -> str:
    try:
        with path.open(encoding="utf-8", errors="replace") as file:
            return file.read(200_000)
    except OSError:
        return ""


@dataclass
class _Cluster:
    kind: SignalKind
    key: str
    signals: list[Signal]
    topic: frozenset[str]


def recommend(
    signals: Sequence[Signal],
    context: ContextFiles,
    *,
    statuses: Mapping[str, tuple[str, str | None]] | None = None,
    latest: date | None = None,
) -> list[Recommendation]:
    """The recommendations of `signals`, best first: clusters scored by impact — each
    conversation weighs its kind's `SEVERITY`, halved every `HALF_LIFE_DAYS` before `latest`
    (default: the latest signal's day), times 1 + log2 of the distinct users, halved for a
    cluster of one conversation — with their status from `statuses` (`new` when unset)."""
    if not signals:
        return []
    latest = latest or max(s.day for s in signals)
    clusters = _clusters(signals)
    found = [_recommendation(c, context, latest, statuses or {}) for c in clusters]
    found.sort(key=lambda r: (-r.score, r.id))
    return found


def _clusters(signals: Sequence[Signal]) -> list[_Cluster]:
    ordered = sorted(signals, key=lambda s: (s.day, s.conversation_id, s.turn, s.kind))
    by_key: dict[tuple[str, str], _Cluster] = {}
    topics: dict[SignalKind, tuple[WordGroups, list[_Cluster]]] = {}
    for signal in ordered:
        table = _main_table(signal)
        if signal.kind == "tool_error":
            key = f"{table or '-'}|{signal.error or '-'}"
        elif table and signal.kind in ("negative_feedback", "correction", "inconsistent"):
            key = table
        else:
            key = ""
        if key:
            cluster = by_key.get((signal.kind, key))
            if cluster is None:
                cluster = by_key[signal.kind, key] = _Cluster(
                    signal.kind, key, [], words(signal.question)
                )
            cluster.signals.append(signal)
            continue
        asked = words(signal.question)
        grouping, clusters = topics.setdefault(signal.kind, (WordGroups(_SAME_TOPIC_AT), []))
        group = grouping.place(asked)
        if group == len(clusters):
            clusters.append(_Cluster(signal.kind, "q:" + " ".join(sorted(asked)), [], asked))
        clusters[group].signals.append(signal)
    return [*by_key.values(), *(c for _, cs in topics.values() for c in cs)]


def _main_table(signal: Signal) -> str | None:
    """The table a signal is about: the one its error names, else the first its SQL read."""
    if signal.error and signal.tables:
        named = mentioned(signal.tables, signal.error)
        if named:
            return named[0]
    return signal.tables[0] if signal.tables else None


def _recommendation(
    cluster: _Cluster,
    context: ContextFiles,
    latest: date,
    statuses: Mapping[str, tuple[str, str | None]],
) -> Recommendation:
    signals = cluster.signals
    conversations = tuple(dict.fromkeys(s.conversation_id for s in signals))
    users = len({s.user or f"?{s.conversation_id}" for s in signals})
    first_day: dict[str, date] = {}
    for s in signals:
        first_day.setdefault(s.conversation_id, s.day)
    weight = sum(0.5 ** ((latest - day).days / HALF_LIFE_DAYS) for day in first_day.values())
    score = SEVERITY[cluster.kind] * weight * (1 + math.log2(max(users, 1)))
    if len(conversations) == 1:
        score /= 2
    tables = tuple(dict.fromkeys(t for s in signals if (t := _main_table(s))))
    ident = "r_" + hashlib.sha256(f"{cluster.kind}|{cluster.key}".encode()).hexdigest()[:10]
    file = _file(cluster, tables, context)
    examples = tuple(dict.fromkeys(s.question for s in signals if s.question))[:3]
    status, note = statuses.get(ident, ("new", None))
    return Recommendation(
        id=ident,
        kind=cluster.kind,
        score=round(score, 2),
        file=file,
        summary=_summary(cluster, tables, file, len(conversations), users, examples),
        conversations=conversations,
        users=users,
        tables=tables,
        error=signals[0].error if cluster.kind == "tool_error" else None,
        first_seen=min(s.day for s in signals),
        last_seen=max(s.day for s in signals),
        examples=examples,
        status=status,
        note=note,
    )


def _file(cluster: _Cluster, tables: tuple[str, ...], context: ContextFiles) -> str:
    if cluster.kind == "uncovered":
        return TESTS_FOLDER
    if tables:
        prefer = "columns" if cluster.kind == "tool_error" else "description"
        if cluster.kind in ("correction", "inconsistent", "negative_feedback"):
            # What a figure means (a metric's definition) lives in semantics first.
            found = context.for_topic(cluster.topic | {tables[0]}, folders=("semantics/",))
            if found:
                return found
        found = context.for_table(tables[0], prefer=prefer)
        if found:
            return found
    found = context.for_topic(cluster.topic)
    return found or FALLBACK_FILE


def _summary(
    cluster: _Cluster,
    tables: tuple[str, ...],
    file: str,
    conversations: int,
    users: int,
    examples: tuple[str, ...],
) -> str:
    who = f"{conversations} conversation{'s' if conversations != 1 else ''} ({users} user{'s' if users != 1 else ''})"
    example = f' — e.g. "{_clip(examples[0])}"' if examples else ""
    table = f"`{tables[0]}`" if tables else "these questions"
    first = cluster.signals[0]
    if cluster.kind == "tool_error":
        return (
            f"{who} hit the same error querying {table}: {first.error}. Describe {table}'s "
            f"columns and how to query them in {file}{example}."
        )
    if cluster.kind == "negative_feedback":
        return (
            f"{who} voted down answers built on {table}{example}. Say in {file} what {table} "
            "holds and which figures it gives."
        )
    if cluster.kind == "correction":
        return (
            f"{who} corrected or re-asked answers built on {table} ({_clip(first.detail, 120)})"
            f"{example}. State the rule the users applied in {file}."
        )
    if cluster.kind == "inconsistent":
        return (
            f"{who}: the same question got different figures on different days "
            f"({_clip(first.detail.split(';')[0], 140)}){example}. Pin down its definition "
            f"in {file}."
        )
    if cluster.kind == "no_answer":
        return (
            f"The agent could not answer {who}{example}. Add what it needs to {file} (the "
            "tables or definitions these questions ask for)."
        )
    return (
        f"{who} asked what no test asks{example}. Promote one to a test under {file}, so the "
        "next evaluation covers it."
    )


def _clip(text: str, most: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"

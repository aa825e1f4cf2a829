"""Production usage in the store: conversations imported per day (re-importing the same file changes nothing), the signals found in them kept current with the suite, and each recommendation's status."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Literal

from eval_pipeline.store import (
    StateFolder,
    ensure_schema_files,
    fetch,
    read_latest,
    write_rows,
)
from eval_pipeline.usage._conversation import Conversation, UsageProblem
from eval_pipeline.usage._jsonl import read_jsonl
from eval_pipeline.usage._nao import SQLITE_HEADER, is_database_url, read_nao_database
from eval_pipeline.usage._otel import read_otlp
from eval_pipeline.usage._privacy import Privacy
from eval_pipeline.usage._recommend import ContextFiles, Recommendation, recommend
from eval_pipeline.usage._signals import Signal, signals_of

__all__ = [
    "STATUSES",
    "WINDOW_DAYS",
    "ImportReport",
    "Ranking",
    "Source",
    "import_usage",
    "rank",
    "refresh_signals",
    "set_status",
    "sniff_source",
    "statuses",
    "stored_conversations",
    "stored_days",
    "stored_signals",
    "trace_files",
    "write_recommendations",
]

Source = Literal["otel", "jsonl", "nao"]
Status = Literal["new", "acknowledged", "dismissed", "done"]
STATUSES: tuple[Status, ...] = ("new", "acknowledged", "dismissed", "done")


@dataclass
class ImportReport:
    """What an import read and kept."""

    read: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    days: list[date] = field(default_factory=list)
    problems: list[UsageProblem] = field(default_factory=list)
    signals: int = 0


def sniff_source(path: Path | str) -> Source:
    """`nao` for a PostgreSQL URL or a SQLite database (a nao backend's), `otel` for OTLP/JSON
    export requests, else `jsonl`, by the file's first bytes or record."""
    if is_database_url(path):
        return "nao"
    path = Path(path)
    with path.open("rb") as head:
        if head.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
            return "nao"
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                return "otel" if '"resourceSpans"' in line[:4096] else "jsonl"
    return "jsonl"


def import_usage(
    paths: Sequence[Path | str],
    layout: StateFolder,
    privacy: Privacy,
    *,
    source: Source | None = None,
    prompts: Sequence[str] = (),
    days: Iterable[date] | None = None,
    refresh: bool = True,
) -> ImportReport:
    """Read every file or database URL (`source`, or each one's own by `sniff_source`) and store its
    conversations by the day each started; a conversation stored before is replaced by its
    new reading (the same id from the same source), kept as it was when unchanged. Then the
    signals are refreshed against the suite's `prompts` (`refresh_signals`). Records that
    cannot be read are in the report's problems, and the rest is stored all the same.
    `days`: only the conversations that started on these days (a day's partition);
    `refresh=False` leaves the signals to the caller (the `usage_signals` asset)."""
    report = ImportReport()
    by_day: dict[date, dict[tuple[str, str], Conversation]] = {}
    wanted = set(days) if days is not None else None
    for given in paths:
        path = given if is_database_url(given) else Path(given)
        kind = source or sniff_source(path)
        if kind == "nao" or is_database_url(path):
            reader = read_nao_database(path, privacy)
        elif kind == "otel":
            reader = read_otlp(path, privacy)
        else:
            reader = read_jsonl(path, privacy)
        for item in reader:
            if isinstance(item, UsageProblem):
                report.problems.append(item)
                continue
            if wanted is not None and item.day not in wanted:
                continue
            report.read += 1
            by_day.setdefault(item.day, {})[(item.source, item.id)] = item
    ensure_schema_files(layout)
    for day, found in sorted(by_day.items()):
        stored = {(r["source"], r["conversation_id"]): r for r in _rows(layout, day)}
        rows = dict(stored)
        changed = False
        for key, conversation in found.items():
            row = conversation.to_row()
            before = stored.get(key)
            if before is None:
                report.added += 1
            elif before["content_hash"] == row["content_hash"] and _same(before, row):
                report.unchanged += 1
                continue
            else:
                report.updated += 1
            rows[key] = row
            changed = True
        if changed:
            write_rows(layout, "usage_conversations", _sorted(rows.values()), run_date=day)
            report.days.append(day)
    if report.days and refresh:
        report.signals = refresh_signals(layout, prompts)
    return report


def _same(before: dict, after: dict) -> bool:
    return all(before.get(k) == after[k] for k in ("user_key", "model", "question"))


def _sorted(rows: Iterable[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["started_at"], r["source"], r["conversation_id"]))


def _rows(layout: StateFolder, day: date) -> list[dict]:
    return read_latest(layout, "usage_conversations", run_date=day)


def stored_days(layout: StateFolder) -> list[date]:
    """The days with stored conversations, oldest first."""
    folder = layout.table_dir("usage_conversations")
    if not folder.exists():
        return []
    days = []
    for child in folder.iterdir():
        name = child.name
        if name.startswith("date="):
            try:
                days.append(date.fromisoformat(name.removeprefix("date=")))
            except ValueError:
                continue
    return sorted(days)


def stored_conversations(layout: StateFolder, *, since: date | None = None) -> list[Conversation]:
    """Every stored conversation (of `since` and after), oldest first."""
    found = []
    for day in stored_days(layout):
        if since is None or day >= since:
            found += [Conversation.from_row(row) for row in _rows(layout, day)]
    return found


def refresh_signals(layout: StateFolder, prompts: Sequence[str]) -> int:
    """Find the signals of every stored conversation against the suite's `prompts` and
    store each day's that changed (a day's signals depend on other days, for answers that
    disagree across days, and on the suite, for questions no test asks); how many in all."""
    conversations = stored_conversations(layout)
    by_day: dict[date, list[Signal]] = {day: [] for day in stored_days(layout)}
    for signal in signals_of(conversations, prompts):
        by_day.setdefault(signal.day, []).append(signal)
    total = 0
    for day, found in by_day.items():
        rows = [s.to_row() for s in found]
        total += len(rows)
        stored = [
            {k: r.get(k) for k in _SIGNAL_COLUMNS}
            for r in read_latest(layout, "usage_signals", run_date=day)
        ]
        if _digest(stored) != _digest(rows):
            write_rows(layout, "usage_signals", rows, run_date=day)
    return total


_SIGNAL_COLUMNS = (
    "conversation_id",
    "run_date",
    "kind",
    "turn",
    "user_key",
    "model",
    "question",
    "tables",
    "error",
    "detail",
)


def stored_signals(layout: StateFolder, *, since: date | None = None) -> list[Signal]:
    found = []
    for day in stored_days(layout):
        if since is None or day >= since:
            found += [
                Signal.from_row(r) for r in read_latest(layout, "usage_signals", run_date=day)
            ]
    return found


def _digest(rows: list[dict]) -> str:
    text = json.dumps(
        sorted(json.dumps(r, sort_keys=True, default=str) for r in rows), ensure_ascii=False
    )
    return hashlib.sha256(text.encode()).hexdigest()


def statuses(layout: StateFolder) -> dict[str, tuple[Status, str | None]]:
    """Each recommendation's current status and note, by id (one never set is `new`)."""
    ensure_schema_files(layout)
    _, rows = fetch(
        layout, "SELECT recommendation_id, status, note FROM recommendation_status_latest"
    )
    return {ident: (status, note) for ident, status, note in rows}


def set_status(layout: StateFolder, ident: str, status: Status, note: str | None = None) -> None:
    """Record a recommendation's new status; every change is kept."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    ensure_schema_files(layout)
    moment = datetime.now(UTC)
    row = {"recommendation_id": ident, "status": status, "note": note, "changed_at": moment}
    write_rows(layout, "recommendation_status", [row], written_at=moment)


def trace_files(root: Path, globs: Sequence[str]) -> list[Path]:
    """The files `usage.traces` names (globs relative to the suite folder), in name order."""
    found: set[Path] = set()
    for pattern in globs:
        found |= {path for path in root.glob(pattern) if path.is_file()}
    return sorted(found)


def write_recommendations(layout: StateFolder, ranked: Sequence[Recommendation]) -> None:
    """Store `ranked` (best first) as the `recommendations` table's current rows."""
    ensure_schema_files(layout)
    rows = [
        {
            "recommendation_id": r.id,
            "rank": rank,
            "kind": r.kind,
            "score": r.score,
            "file": r.file,
            "summary": r.summary,
            "conversations": list(r.conversations),
            "users": r.users,
            "tables": list(r.tables),
            "error": r.error,
            "first_seen": r.first_seen,
            "last_seen": r.last_seen,
            "status": r.status,
            "summarized_by": r.summarized_by,
        }
        for rank, r in enumerate(ranked, start=1)
    ]
    write_rows(layout, "recommendations", rows)


#: Recommendations read this far back from the latest stored day by default.
WINDOW_DAYS = 30


@dataclass(frozen=True)
class Ranking:
    """The recommendations of a window of days, best first (empty with no usage stored)."""

    recommendations: list[Recommendation]
    since: date | None
    latest: date | None
    #: Signals of the window that `keep` left out (corrections the judge did not confirm).
    left_out: int = 0


def rank(
    layout: StateFolder,
    suite_root: Path,
    prompts: Sequence[str] | None,
    *,
    since: date | None = None,
    write: bool = True,
    keep: Callable[[list[Signal]], list[Signal]] | None = None,
) -> Ranking:
    """Bring the signals up to date with the suite's `prompts` (a question a new test asks is
    covered now; None: the stored signals are current, a caller refreshed them), rank the
    recommendations of the days from `since` (default: `WINDOW_DAYS` before the latest
    stored day) with their statuses, and store them as the `recommendations` table (unless
    `write=False`: the caller stores them). `keep`: the signals that count, of the window's
    (a judge's confirmation); every one by default."""
    days = stored_days(layout)
    if not days:
        return Ranking([], None, None)
    if prompts is not None:
        refresh_signals(layout, prompts)
    since = since or days[-1] - timedelta(days=WINDOW_DAYS)
    found = stored_signals(layout, since=since)
    kept = keep(found) if keep is not None else found
    ranked = recommend(
        kept,
        ContextFiles.of_folder(suite_root),
        statuses=statuses(layout),
        latest=days[-1],
    )
    if write:
        write_recommendations(layout, ranked)
    return Ranking(ranked, since, days[-1], left_out=len(found) - len(kept))

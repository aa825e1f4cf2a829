"""A team's past results files (nao's `results_*.json`, or ours) brought into the store as past days."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.pipeline._imported_runs import ImportedRun, ResultsFileError, read_results_file
from eval_pipeline.pipeline._rows import IMPORTED_KEY_PREFIX
from eval_pipeline.pipeline._summaries import summarize_grades
from eval_pipeline.store import (
    StateFolder,
    ensure_schema_files,
    publish_results,
    query,
    read_latest,
    require_storable_rows,
    updating_partition,
    write_rows,
)

# Imported rows carry `import:<file hash>:<index>` as their run key: a second import of the
# same file finds them and adds nothing, whatever the file is called now.
_KEY_PREFIX = IMPORTED_KEY_PREFIX


@dataclass
class ImportReport:
    """What an import did: files brought in, files already in the store, files skipped."""

    imported: list[Path] = field(default_factory=list)
    already_imported: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why)
    runs: int = 0
    days: list[date] = field(default_factory=list)


def import_results(paths: Iterable[Path | str], *, layout: StateFolder) -> ImportReport:
    """Bring results files into the store as the days they were run on.

    Each file's runs become `agent_runs`, `tool_calls`, `grades` and a recomputed
    `model_summaries` row in the (model, day) partitions the file covers, beside what those
    partitions already hold (a past evaluation of ours, or another file of the same day: its
    runs then count as further attempts). The day is a result's `run_date` (our files), else
    the date of the file's `timestamp` (nao's). Imported runs are history: an evaluation of
    ours on that day never reuses them, and its runs replace them in the day's tables (the
    `*_history` views keep them).

    Idempotent: rows are keyed by the file's content hash, so importing a file again (under
    any name) adds nothing, and a run of one of our files that the store already holds (its
    `run_key`: the file `eval-pipeline test` wrote) is not added again. A whole file is
    checked before any of it is written: one that cannot be read, or one field of it that
    does not hold what it should, and the file is named in `skipped` with the field and
    nothing of it is written; it never stops the other files.

    Args:
        paths: results files, nao's (`tests/outputs/results_*.json`) or ours.
        layout: the store to import into.
    """
    report = ImportReport()
    ensure_schema_files(layout)
    for raw in paths:
        path = Path(raw)
        try:
            results = read_results_file(path)
            _check_storable(results.runs)
        except ResultsFileError as error:
            report.skipped.append((path, str(error)))
            continue
        digest, runs = results.digest, results.runs
        written = _store(layout, digest, runs)
        if written:
            report.imported.append(path)
            report.runs += written
            report.days = sorted({*report.days, *(run.run_date for run in runs)})
        else:
            report.already_imported.append(path)
    if report.imported:
        publish_results(layout)  # an import is an evaluation of the past: other clients see it
    return report


def _check_storable(runs: Sequence[ImportedRun]) -> None:
    """Every row of every run converts as the store writes it (a lone surrogate in a text, a
    number out of a column's range): found now, not half way through the writes."""
    for index, run in enumerate(runs):
        key = f"{_KEY_PREFIX}check:{index}"
        for table, rows in (
            ("agent_runs", [_run_row(run, key, run.attempt)]),
            ("tool_calls", _tool_call_rows(run, key, run.attempt)),
            ("grades", [_grade_row(run, key, run.attempt)]),
        ):
            try:
                require_storable_rows(table, rows)
            except ValueError as error:
                raise ResultsFileError(
                    f"results[{index}]: cannot be stored ({table}.{error})"
                ) from None


def _store(layout: StateFolder, digest: str, runs: Sequence[ImportedRun]) -> int:
    """Write the runs into their partitions; how many were new (0: already imported)."""
    by_partition: dict[tuple[str, date], list[tuple[int, ImportedRun]]] = defaultdict(list)
    for index, run in enumerate(runs):
        by_partition[(run.model, run.run_date)].append((index, run))
    # A partition this file went into once is done, even when an evaluation of ours has
    # replaced the imported runs there since (they are history: `grades_history` keeps them).
    done = _imported_partitions(layout, digest)
    written = 0
    for (model, day), items in sorted(by_partition.items()):
        if (model, day) in done:
            continue
        with updating_partition(layout, model, day):
            written += _store_partition(layout, digest, model, day, items)
    return written


def _imported_partitions(layout: StateFolder, digest: str) -> set[tuple[str, date]]:
    """The (model, day) partitions whose grades ever held this file's runs."""
    frame = query(
        layout,
        "SELECT DISTINCT model, CAST(run_date AS VARCHAR) AS day FROM grades_history "
        "WHERE starts_with(run_key, ?)",
        [f"{_KEY_PREFIX}{digest}:"],
    )
    return {(model, date.fromisoformat(day)) for model, day in frame.itertuples(index=False)}


def _store_partition(
    layout: StateFolder,
    digest: str,
    model: str,
    day: date,
    items: Sequence[tuple[int, ImportedRun]],
) -> int:
    mine = f"{_KEY_PREFIX}{digest}:"
    grades = read_latest(layout, "grades", model=model, run_date=day)
    if any(str(row["run_key"]).startswith(mine) for row in grades):
        return 0  # grades are written last: they are there only when all the rest is
    # Rows of an import of this file that stopped half-way are replaced, not doubled.
    runs = [
        row
        for row in read_latest(layout, "agent_runs", model=model, run_date=day)
        if not str(row["key"]).startswith(mine)
    ]
    tool_calls = [
        row
        for row in read_latest(layout, "tool_calls", model=model, run_date=day)
        if not str(row["run_key"]).startswith(mine)
    ]
    # A run of ours that the partition holds (the file `eval-pipeline test` wrote) is there.
    stored = {(row["name"], row["key"]) for row in runs}
    items = [(i, run) for i, run in items if (run.name, run.run_key) not in stored]
    if not items:
        return 0
    # Attempts go after those the partition already holds, so no (test, attempt) repeats.
    offset: dict[str, int] = defaultdict(int)
    for row in runs:
        offset[row["name"]] = max(offset[row["name"]], int(row["attempt"]) + 1)
    for index, run in items:
        key = f"{mine}{index}"
        attempt = offset[run.name] + run.attempt
        runs.append(_run_row(run, key, attempt))
        tool_calls.extend(_tool_call_rows(run, key, attempt))
        grades.append(_grade_row(run, key, attempt))
    summary = summarize_grades(grades).to_row(f"{_KEY_PREFIX}{digest}")
    write_rows(layout, "agent_runs", runs, model=model, run_date=day)
    write_rows(layout, "tool_calls", tool_calls, model=model, run_date=day)
    write_rows(layout, "model_summaries", [{**summary, "run_date": day}], model=model, run_date=day)
    write_rows(layout, "grades", grades, model=model, run_date=day)
    return len(items)


def _run_row(run: ImportedRun, key: str, attempt: int) -> dict[str, Any]:
    return {
        "key": key,
        "name": run.name,
        "model": run.model,
        "run_date": run.run_date,
        "attempt": attempt,
        "input_hash": None,
        "context_hash": None,
        "status": "error" if run.status == "error" else "completed",
        "final_text": run.final_text,
        "messages": [],
        "tool_calls": run.tool_calls,
        "queries": [],
        "answer": None,
        "input_tokens": 0,
        "cached_input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": run.tokens,
        "cost_usd": run.cost_usd,
        "duration_ms": run.duration_ms,
        "turns": 0,
        "tool_call_count": len(run.tool_calls),
        "error": run.error,
        "started_at": None,
        "finished_at": run.written_at,
        "reused": False,
    }


def _tool_call_rows(run: ImportedRun, key: str, attempt: int) -> list[dict[str, Any]]:
    return [
        {
            "run_key": key,
            "name": run.name,
            "model": run.model,
            "run_date": run.run_date,
            "attempt": attempt,
            "call_index": i,
            "tool": call["name"],
            "arguments": call["arguments"],
            "result": call["result"],
            "error": call["error"],
            "duration_ms": call["duration_ms"],
        }
        for i, call in enumerate(run.tool_calls)
    ]


def _grade_row(run: ImportedRun, key: str, attempt: int) -> dict[str, Any]:
    return {
        "name": run.name,
        "model": run.model,
        "run_date": run.run_date,
        "attempt": attempt,
        "run_key": key,
        "content_hash": None,
        "status": run.status,
        "passed": run.passed,
        "message": run.message,
        "verified": run.verified,
        "checks": run.checks,
        "tokens": run.tokens,
        "cost_usd": run.cost_usd,
        "duration_ms": run.duration_ms,
        "tool_call_count": len(run.tool_calls),
        "judge": None,
        "imported_from": run.source,
    }

"""A team's past results files (nao's `results_*.json`, or ours) brought into the store as past days."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.pipeline._grades import summarize_grades
from eval_pipeline.store import (
    StoreLayout,
    ensure_schema_files,
    publish_results,
    read_latest,
    updating_partition,
    write_rows,
)
from eval_pipeline.suite import to_model_id

# Imported rows carry this in their run key (`import:<file hash>:<index>`): a second import of
# the same file finds them and adds nothing, whatever the file is called now.
_KEY_PREFIX = "import:"
_MAX_BYTES = 256 * 1024 * 1024  # a results file bigger than this is not one we can hold


class ResultsFileError(ValueError):
    """A file that is not a results file we can read; the message says why, in one line."""


@dataclass(frozen=True)
class ImportedRun:
    """One result of a results file, in our terms."""

    name: str
    model: str
    label: str  # the model as the file spells it (nao's `openaiCompatible/vllm:qwen3`)
    run_date: date
    attempt: int  # within the file, per test and model
    status: str  # passed / failed / error
    passed: bool
    verified: bool
    message: str
    tokens: int
    cost_usd: float | None
    duration_ms: float
    tool_calls: list[dict[str, Any]]
    final_text: str
    error: str | None
    checks: list[dict[str, Any]]
    # The key our results files give each run: a run the store already holds is not added again.
    run_key: str | None = None


@dataclass
class ImportReport:
    """What an import did: files brought in, files already in the store, files skipped."""

    imported: list[Path] = field(default_factory=list)
    already_imported: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why)
    runs: int = 0
    days: list[date] = field(default_factory=list)


def import_results(paths: Iterable[Path | str], *, layout: StoreLayout) -> ImportReport:
    """Bring results files into the store as the days they were run on.

    Each file's runs become `agent_runs`, `tool_calls`, `grades` and a recomputed
    `model_summaries` row in the (model, day) partitions the file covers, beside what those
    partitions already hold (a past evaluation of ours, or another file of the same day: its
    runs then count as further attempts). The day is a result's `run_date` (our files), else
    the date of the file's `timestamp` (nao's).

    Idempotent: rows are keyed by the file's content hash, so importing a file again (under
    any name) adds nothing, and a run of one of our files that the store already holds (its
    `run_key`: the file `eval-pipeline test` wrote) is not added again. A file that cannot be read is named in `skipped` with the reason
    and nothing of it is written; it never stops the other files.

    Args:
        paths: results files, nao's (`tests/outputs/results_*.json`) or ours.
        layout: the store to import into.
    """
    report = ImportReport()
    ensure_schema_files(layout)
    for raw in paths:
        path = Path(raw)
        try:
            digest, runs = read_results_file(path)
        except ResultsFileError as error:
            report.skipped.append((path, str(error)))
            continue
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


def read_results_file(path: Path) -> tuple[str, list[ImportedRun]]:
    """The content hash and runs of one results file, all checked before anything is written.

    Raises:
        ResultsFileError: the file is missing, not JSON, or not shaped like a results file.
    """
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise ResultsFileError(f"larger than {_MAX_BYTES // 2**20} MiB")
        content = path.read_bytes()
    except OSError as error:
        raise ResultsFileError(f"cannot be read ({error.strerror or error})") from None
    try:
        document = json.loads(content)
    except json.JSONDecodeError as error:
        raise ResultsFileError(
            f"is not JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    except (UnicodeDecodeError, RecursionError):
        raise ResultsFileError("is not JSON text") from None
    digest = hashlib.sha256(content).hexdigest()[:16]
    return digest, _runs(document)


def _runs(document: Any) -> list[ImportedRun]:
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise ResultsFileError("has no `results` list; is it a results_*.json file?")
    stamp = document.get("timestamp")
    try:
        file_day = datetime.fromisoformat(stamp).date() if isinstance(stamp, str) else None
    except ValueError:
        raise ResultsFileError(f"`timestamp` {stamp!r:.40} is not an ISO date and time") from None
    attempts: dict[tuple[str, str], int] = defaultdict(int)
    runs = []
    for i, result in enumerate(document["results"]):
        where = f"results[{i}]"
        if not isinstance(result, dict):
            raise ResultsFileError(f"{where} is not an object")
        name, label = result.get("name"), result.get("model")
        if not (isinstance(name, str) and name.strip()):
            raise ResultsFileError(f"{where}.name is missing or not text")
        if not (isinstance(label, str) and ":" in label and "|" not in label):
            raise ResultsFileError(f"{where}.model {label!r:.60} is not `provider:model_id`")
        if not isinstance(result.get("passed"), bool):
            raise ResultsFileError(f"{where}.passed is missing or not true/false")
        run_date = _day(result.get("run_date"), file_day, where)
        model = to_model_id(label)
        attempt = _attempt(result, where)
        if attempt is None:
            attempt = attempts[(name, model)]
        attempts[(name, model)] = max(attempts[(name, model)], attempt + 1)
        runs.append(_run(result, name, model, label, run_date, attempt, where))
    return runs


def _day(value: Any, file_day: date | None, where: str) -> date:
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ResultsFileError(f"{where}.run_date {value!r:.40} is not a date") from None
    if file_day is None:
        raise ResultsFileError("has no `timestamp` to date its runs by")
    return file_day


def _attempt(result: Mapping[str, Any], where: str) -> int | None:
    value = result.get("attempt")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10_000:
        raise ResultsFileError(f"{where}.attempt {value!r:.20} is not an attempt number")
    return value


def _number(result: Mapping[str, Any], key: str, where: str) -> float | None:
    value = result.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ResultsFileError(f"{where}.{key} {value!r:.20} is not a number")
    if value < 0:
        raise ResultsFileError(f"{where}.{key} {value!r:.20} is negative")
    return float(value)


def _run(
    result: Mapping[str, Any],
    name: str,
    model: str,
    label: str,
    run_date: date,
    attempt: int,
    where: str,
) -> ImportedRun:
    details = result.get("details") if isinstance(result.get("details"), dict) else {}
    error = result.get("error") or details.get("error")
    ours = "status" in result
    if ours:
        status = result["status"]
        if status not in ("passed", "failed", "error"):
            raise ResultsFileError(f"{where}.status {status!r:.20} is not passed/failed/error")
    else:
        status = "passed" if result["passed"] else "error" if error else "failed"
    message = result.get("message")
    # Ours keeps the honest cost in `cost_usd` (null: unknown); `cost` is nao's number.
    cost = _number(result, "cost_usd" if "cost_usd" in result else "cost", where)
    if not ours and cost == 0:
        cost = None  # nao writes 0 for a model it has no price for (#1220): unknown, not free
    tokens = _number(result, "tokens", where)
    return ImportedRun(
        name=name,
        model=model,
        label=label,
        run_date=run_date,
        attempt=attempt,
        status=status,
        passed=status == "passed",
        verified=bool(result.get("verified", message != "no verification")),
        message=message if isinstance(message, str) else status,
        tokens=int(tokens or 0),
        cost_usd=cost,
        duration_ms=_number(result, "duration_ms", where) or 0.0,
        tool_calls=_tool_calls(details.get("tool_calls")),
        final_text=details.get("response_text")
        if isinstance(details.get("response_text"), str)
        else "",
        error=str(error) if error else None,
        checks=_checks(details, status, message) if not ours else details.get("checks") or [],
        run_key=result["run_key"] if isinstance(result.get("run_key"), str) else None,
    )


def _tool_calls(calls: Any) -> list[dict[str, Any]]:
    """Tool calls in our record shape, from nao's (`toolName`, `toolCallId`, `args`) or ours."""
    found = []
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(call, dict):
            continue
        arguments = call.get("args", call.get("arguments"))
        found.append(
            {
                "id": str(call.get("toolCallId") or call.get("id") or f"call_{i}"),
                "name": str(call.get("toolName") or call.get("name") or "unknown"),
                "arguments": arguments if isinstance(arguments, dict) else None,
                "raw_arguments": json.dumps(arguments, default=str, ensure_ascii=False),
                "result": call.get("result"),
                "error": call.get("error") if isinstance(call.get("error"), str) else None,
                "duration_ms": float(call.get("duration_ms") or 0.0),
            }
        )
    return found


def _checks(details: Mapping[str, Any], status: str, message: Any) -> list[dict[str, Any]]:
    """nao's data comparison as our `data` check, so the viewer shows its tables and diff."""
    if details.get("actual_data") is None and details.get("expected_data") is None:
        return []
    comparison = details.get("comparison")
    return [
        {
            "kind": "data",
            "status": status,
            "message": message if isinstance(message, str) else status,
            "details": {
                "actual_data": details.get("actual_data"),
                "expected_data": details.get("expected_data"),
                # nao ≤ 0.3.x wrote its diff text here; later, the tolerances used.
                "diff": comparison if isinstance(comparison, str) else None,
                "tolerance": comparison if isinstance(comparison, dict) else None,
                "verification_sql": details.get("verification_sql"),
            },
            "judge": None,
        }
    ]


def _store(layout: StoreLayout, digest: str, runs: Sequence[ImportedRun]) -> int:
    """Write the runs into their partitions; how many were new (0: already imported)."""
    by_partition: dict[tuple[str, date], list[tuple[int, ImportedRun]]] = defaultdict(list)
    for index, run in enumerate(runs):
        by_partition[(run.model, run.run_date)].append((index, run))
    written = 0
    for (model, day), items in sorted(by_partition.items()):
        with updating_partition(layout, model, day):
            written += _store_partition(layout, digest, model, day, items)
    return written


def _store_partition(
    layout: StoreLayout,
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
        "finished_at": None,
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
    }

"""Results files read back: two compared by test and model, one summed up (nao's `test diff` / `test summary`).

Both work on the `results` list every results file holds (ours and nao's alike: `name`,
`model`, `passed`, `tokens`, `cost`, `duration_ms`, `tool_call_count`), never on the store,
so a file from another machine or from `nao test` compares as well as one written here. A run
that ended in an error (`entry_status`) is told apart from a failed one, as the test
command's summary line tells them apart: it says nothing of the agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.pipeline._imported_runs import (
    ResultsFileError,
    checked_number,
    entry_status,
    load_results_json,
)

REGRESSION, FIX, UNCHANGED, ADDED, REMOVED = "regression", "fix", "unchanged", "added", "removed"
#: A test whose run in the second file is an error: no verdict to compare, so neither a
#: regression nor unchanged.
ERROR = "error"
#: The order changes are counted and listed in.
CHANGES = (REGRESSION, ERROR, FIX, UNCHANGED, ADDED, REMOVED)
RESULTS_GLOB = "results_*.json"
#: The numbers of an entry a summary adds up.
_SUMMED = ("tokens", "cost", "duration_ms", "tool_call_count")


def results_entries(path: Path) -> list[Mapping[str, Any]]:
    """The `results` list of a results file, each entry checked for what a diff or a
    summary reads: the keys, and the numbers summed (`tokens`, `cost`, `duration_ms`,
    `tool_call_count`) within what a run can hold, as an import checks them. Each entry
    holds its `status` (`entry_status`: nao's entries have none, it is read as an import
    reads it).

    Raises:
        ResultsFileError: the file is missing, too large, nested too deep or no JSON, or an
            entry lacks a field or holds a number no run has; the message names the file and
            the field (`results[3].passed`).
    """
    try:
        _content, document = load_results_json(path)
    except ResultsFileError as error:
        raise ResultsFileError(f"{path}: {error}") from None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        raise ResultsFileError(f"{path}: no `results` list; is it a results file?")
    entries = []
    for index, entry in enumerate(results):
        where = f"{path}: results[{index}]"
        if not isinstance(entry, dict):
            raise ResultsFileError(f"{where}: expected an object")
        for field, kind in (("name", str), ("model", str), ("passed", bool)):
            if not isinstance(entry.get(field), kind):
                raise ResultsFileError(f"{where}.{field}: expected a {kind.__name__}")
        for field in _SUMMED:
            checked_number(entry.get(field), f"{where}.{field}")
        entries.append({**entry, "status": entry_status(entry, where)})
    return entries


@dataclass(frozen=True)
class PairChange:
    """One test of one model in two results files. `before` / `after`: `passed`, `failed`
    or `error` over every attempt the file holds (`_outcome`), None when the file has no
    run of it."""

    test: str
    model: str
    before: str | None
    after: str | None

    @property
    def change(self) -> str:
        """A test now in error is an `error` whatever it was: the run says nothing of the
        agent, so it is no regression (nor unchanged). An error before is no verdict to
        compare with: a pass now is a fix, a failure now unchanged (neither passed)."""
        if self.before is None:
            return ADDED
        if self.after is None:
            return REMOVED
        if self.after == "error":
            return ERROR
        passed_before, passed_after = self.before == "passed", self.after == "passed"
        if passed_before == passed_after:
            return UNCHANGED
        return FIX if passed_after else REGRESSION


def _outcome(statuses: Sequence[str]) -> str:
    """A test's outcome in a file over its attempts: it passed when all of them passed; a
    failed attempt fails it (the agent was wrong at least once); else an error left it
    without a verdict."""
    if "failed" in statuses:
        return "failed"
    return "error" if "error" in statuses else "passed"


def _outcome_by_pair(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    statuses: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        statuses.setdefault((entry["name"], entry["model"]), []).append(entry["status"])
    return {pair: _outcome(found) for pair, found in statuses.items()}


def compare_results(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[PairChange]:
    """Every (test, model) of either file (`results_entries`), sorted, with how it changed.
    With several attempts, a test passes in a file when all of its attempts there passed."""
    old, new = _outcome_by_pair(before), _outcome_by_pair(after)
    return [
        PairChange(test, model, old.get((test, model)), new.get((test, model)))
        for test, model in sorted(old.keys() | new.keys())
    ]


def count_changes(pairs: Sequence[PairChange]) -> dict[str, int]:
    counts = dict.fromkeys(CHANGES, 0)
    for pair in pairs:
        counts[pair.change] += 1
    return counts


def latest_results_files(folder: Path, count: int) -> list[Path]:
    """The `count` results files last written in `folder`, oldest first (by the time they
    were written: a file's name holds the day it evaluated, which may be a past one)."""
    files = [p for p in folder.glob(RESULTS_GLOB) if p.is_file()] if folder.is_dir() else []
    files.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
    return files[-count:] if len(files) >= count else []


def _total(entries: Sequence[Mapping[str, Any]], field: str) -> float:
    return sum(entry.get(field) or 0 for entry in entries)


@dataclass(frozen=True)
class _Sums:
    """What the file's totals and each model's row count alike."""

    total: int
    passed: int
    errors: int
    duration_ms: float
    tool_calls: float

    @classmethod
    def of(cls, entries: Sequence[Mapping[str, Any]]) -> _Sums:
        return cls(
            total=len(entries),
            passed=sum(1 for entry in entries if entry["passed"]),
            errors=sum(1 for entry in entries if entry["status"] == "error"),
            duration_ms=_total(entries, "duration_ms"),
            tool_calls=_total(entries, "tool_call_count"),
        )

    def per_run(self, value: float, digits: int) -> float:
        return round(value / self.total, digits) if self.total else 0


def _unpriced(entries: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for entry in entries if entry.get("cost") is None)


def _pass_metrics(entries: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """k and the mean over tests of pass@1, pass@k and pass^k (each test counts once)."""
    by_test: dict[tuple[str, str], list[bool]] = {}
    for entry in entries:
        by_test.setdefault((entry["name"], entry["model"]), []).append(entry["passed"])
    if not by_test:
        return {"k": 0, "pass_at_1": 0.0, "pass_at_k": 0.0, "pass_hat_k": 0.0}
    attempts = list(by_test.values())
    return {
        "k": max(len(a) for a in attempts),
        "pass_at_1": sum(sum(a) / len(a) for a in attempts) / len(attempts),
        "pass_at_k": sum(any(a) for a in attempts) / len(attempts),
        "pass_hat_k": sum(all(a) for a in attempts) / len(attempts),
    }


def summarize_results(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What `nao test summary` reports of a file (`results_entries`): the totals over every
    run, then one row per model (best pass rate first, the cheaper first on a tie).
    `failed` is nao's, every run that did not pass; ours: `errors`, how many of those ended
    in an error, and `unpriced_runs`, runs whose cost is unknown (null), counted as 0 in the
    totals as nao counts them."""
    sums = _Sums.of(entries)
    overall = {
        "total": sums.total,
        "passed": sums.passed,
        "failed": sums.total - sums.passed,
        "errors": sums.errors,
        "total_tokens": int(_total(entries, "tokens")),
        "total_cost": _total(entries, "cost"),
        "total_duration_ms": int(sums.duration_ms),
        "total_duration_s": round(sums.duration_ms / 1000, 2),
        "total_tool_calls": int(sums.tool_calls),
        "avg_duration_ms": sums.per_run(sums.duration_ms, 0),
        "avg_tool_calls": sums.per_run(sums.tool_calls, 1),
        "unpriced_runs": _unpriced(entries),
    }
    models: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        models.setdefault(entry["model"], []).append(entry)
    by_model = [_model_row(model, runs) for model, runs in models.items()]
    by_model.sort(key=lambda row: (-row["pass_rate"], row["total_cost"], row["model"]))
    return {"summary": overall, "by_model": by_model}


def _model_row(model: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    sums = _Sums.of(runs)
    return {
        "model": model,
        "total": sums.total,
        "passed": sums.passed,
        "failed": sums.total - sums.passed,
        "errors": sums.errors,  # ours
        "pass_rate": round(sums.passed / sums.total * 100, 1),  # a percentage, as nao's
        "total_tokens": int(_total(runs, "tokens")),
        "total_cost": round(_total(runs, "cost"), 6),
        "total_duration_ms": int(sums.duration_ms),
        "avg_duration_ms": sums.per_run(sums.duration_ms, 0),
        "total_tool_calls": int(sums.tool_calls),
        "avg_tool_calls": sums.per_run(sums.tool_calls, 1),
        **_pass_metrics(runs),
        "unpriced_runs": _unpriced(runs),  # ours
    }

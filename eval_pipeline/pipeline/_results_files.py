"""Results files read back: two compared by test and model, one summed up (nao's `test diff` / `test summary`).

Both work on the `results` list every results file holds (ours and nao's alike: `name`,
`model`, `passed`, `tokens`, `cost`, `duration_ms`, `tool_call_count`), never on the store,
so a file from another machine or from `nao test` compares as well as one written here. A run
that ended in an error (`entry_status`) is told apart from a failed one, as the test
command's summary line tells them apart: it says nothing of the agent. A verdict that changed
between a file nao graded and one of ours is the grading rules' change, not the agent's, as
`eval-pipeline test` says of runs imported from nao.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.agents import NAO_PREFIX
from eval_pipeline.pipeline._imported_runs import (
    OURS,
    ResultsFileError,
    checked_number,
    entry_status,
    graded_by,
    load_results_json,
)
from eval_pipeline.suite import to_model_id

REGRESSION, FIX, UNCHANGED, ADDED, REMOVED = "regression", "fix", "unchanged", "added", "removed"
#: A test whose run in the second file is an error: no verdict to compare, so neither a
#: regression nor unchanged.
ERROR = "error"
#: A verdict that changed between files graded by different tools (nao's and ours): the
#: rules differ (nao compares rows in any order), so it says nothing of the agent.
BY_RULES = "changed by grading rules"
#: The order changes are counted and listed in.
CHANGES = (REGRESSION, ERROR, BY_RULES, FIX, UNCHANGED, ADDED, REMOVED)
RESULTS_GLOB = "results_*.json"
#: The numbers of an entry a summary adds up.
_SUMMED = ("tokens", "cost", "duration_ms", "tool_call_count")


def results_entries(path: Path) -> list[Mapping[str, Any]]:
    """The `results` list of a results file, each entry checked for what a diff or a
    summary reads: the keys, and the numbers summed (`tokens`, `cost`, `duration_ms`,
    `tool_call_count`) within what a run can hold, as an import checks them. Each entry
    holds its `status` (`entry_status`: nao's entries have none, it is read as an import
    reads it) and who graded it (`graded_by`: the file's grader, as an import records it).

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
    grader = graded_by(document)
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
        entries.append({**entry, "status": entry_status(entry, where), "graded_by": grader})
    return entries


def answerer(model: str, grader: str = OURS) -> str:
    """Who answered a run of a results file, as one id whatever the spelling: a model as our
    id (`openaiCompatible/vllm:qwen3` and `vllm:qwen3` are one), nao's agent as
    `nao:<our id>`. A run in a file nao graded is nao's agent's (`nao test` runs nothing
    else), so nao's `openaiCompatible/vllm:qwen3` is ours `nao:openaiCompatible/vllm:qwen3`."""
    if grader != OURS:
        model = f"{NAO_PREFIX}:{model}"
    prefix, colon, rest = model.partition(":")
    if prefix == NAO_PREFIX and colon:
        return f"{NAO_PREFIX}:{to_model_id(rest)}"
    return to_model_id(model)


@dataclass(frozen=True)
class PairChange:
    """One test of one answerer in two results files. `model`: as the second file spells it
    (the first when the second has no run of it); `before` / `after`: `passed`, `failed` or
    `error` over every attempt the file holds (`attempts_outcome`), None when the file has no
    run of it; `graded_before` / `graded_after`: who graded each side (`graded_by`), None for
    a side that has no run (or for stored grades, all ours)."""

    test: str
    model: str
    before: str | None
    after: str | None
    graded_before: str | None = None
    graded_after: str | None = None
    #: `answerer(model)`, what the pair was matched on.
    answerer: str = ""

    @property
    def other_rules(self) -> str | None:
        """The other tool (`nao 0.3.29`) that graded one side when the sides were graded by
        different rules, else None."""
        graders = {self.graded_before, self.graded_after}
        if None in graders or len(graders) == 1:
            return None
        return next(g for g in sorted(graders, key=str) if g != OURS)

    @property
    def change(self) -> str:
        """A test now in error is an `error` whatever it was: the run says nothing of the
        agent, so it is no regression (nor unchanged). An error before is no verdict to
        compare with: a pass now is a fix, a failure now unchanged (neither passed). Two
        verdicts graded by different rules that differ are the rules' change."""
        if self.before is None:
            return ADDED
        if self.after is None:
            return REMOVED
        if self.after == "error":
            return ERROR
        passed_before, passed_after = self.before == "passed", self.after == "passed"
        if passed_before == passed_after:
            return UNCHANGED
        if self.before != "error" and self.other_rules is not None:
            return BY_RULES
        return FIX if passed_after else REGRESSION

    def names(self, wanted: str) -> bool:
        """`--model wanted` names this pair: its spelling, our id of it, or its answerer."""
        return (
            wanted == self.model
            or to_model_id(wanted) == to_model_id(self.model)
            or answerer(wanted) == self.answerer
        )


def attempts_outcome(statuses: Sequence[str]) -> str:
    """A test's outcome over its attempts (each `passed`, `failed` or `error`): it passed
    when all of them passed; a failed attempt fails it (the agent was wrong at least once);
    else an error left it without a verdict."""
    if "failed" in statuses:
        return "failed"
    return "error" if "error" in statuses else "passed"


@dataclass
class _Side:
    """One file's runs of one (test, answerer): outcome, spelling and grader."""

    statuses: list[str]
    model: str
    grader: str


def _sides(
    entries: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], _Side]:
    """(test, answerer) → the file's runs of it. A run of nao's agent in nao's file pairs
    with the other file's runs of the same model by our built-in agent when that file has no
    run of nao's agent with it (a file of ours written before nao's agent was moved over),
    as an import reads nao's runs as the model's."""
    theirs = {answerer(e["model"], e["graded_by"]) for e in other}
    sides: dict[tuple[str, str], _Side] = {}
    for entry in entries:
        key = answerer(entry["model"], entry["graded_by"])
        if key not in theirs and entry["graded_by"] != OURS:
            plain = to_model_id(entry["model"])
            key = plain if plain in theirs else key
        side = sides.setdefault((entry["name"], key), _Side([], entry["model"], entry["graded_by"]))
        side.statuses.append(entry["status"])
    return sides


def compare_results(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[PairChange]:
    """Every (test, answerer) of either file (`results_entries`), sorted, with how it
    changed. With several attempts, a test passes in a file when all of its attempts there
    passed."""
    old, new = _sides(before, after), _sides(after, before)
    pairs = []
    for test, key in sorted(old.keys() | new.keys()):
        was, now = old.get((test, key)), new.get((test, key))
        pairs.append(
            PairChange(
                test,
                next(side.model for side in (now, was) if side is not None),
                attempts_outcome(was.statuses) if was else None,
                attempts_outcome(now.statuses) if now else None,
                was.grader if was else None,
                now.grader if now else None,
                key,
            )
        )
    return pairs


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

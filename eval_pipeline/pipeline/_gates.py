"""Quality gates over results: minimum accuracy (oxy's average / all modes) and the two rules of "regressed"."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cache
from importlib import resources
from typing import Any

from eval_pipeline.grading import CaseMetrics, PairedComparison, compare_models
from eval_pipeline.pipeline._imported_runs import OURS
from eval_pipeline.pipeline._results_files import (
    ERROR,
    FIX,
    REGRESSION,
    UNCHANGED,
    PairChange,
    attempts_outcome,
)
from eval_pipeline.store import StateFolder, fetch, previous_graded_day, query, read_latest
from eval_pipeline.suite import ThresholdMode


@dataclass(frozen=True)
class AccuracyGate:
    """The verdict of an evaluation (see `accuracy_gate`). `met`: the accuracy's own verdict;
    `passed`: the whole gate's, which error runs fail unless errors are allowed."""

    met: bool
    accuracy: float
    threshold: float | None
    mode: ThresholdMode
    below: list[tuple[str, float]] = field(default_factory=list)  # (case, accuracy) under the bar
    #: Test → its runs that ended as `error`: the provider, an agent endpoint, a timeout or
    #: the judge failed, so they say nothing of the agent's answer.
    errored: dict[str, int] = field(default_factory=dict)
    #: `test.allow_errors` / `--allow-errors`: error runs count as runs that did not pass.
    allow_errors: bool = False

    @property
    def errors(self) -> int:
        return sum(self.errored.values())

    @property
    def incomplete(self) -> bool:
        """Some runs are errors and errors are not allowed: the evaluation cannot vouch for
        the agent either way, so it fails as a broken run (exit 3), not as a wrong answer."""
        return self.errors > 0 and not self.allow_errors

    @property
    def passed(self) -> bool:
        return self.met and not self.incomplete

    @property
    def message(self) -> str:
        if self.incomplete:
            return (
                f"{self.errors_text}; the evaluation is incomplete whatever its accuracy "
                f"({self.accuracy:.1%}), since errors are not allowed (test.allow_errors)"
            )
        if self.errors:
            return f"{self._accuracy_message}; {self.errors_text}, counted as not passed"
        return self._accuracy_message

    @property
    def errors_text(self) -> str:
        """E.g. "3 run(s) ended in an error: top [m] (2 runs), total [m]"."""
        listed = ", ".join(
            name if runs == 1 else f"{name} ({runs} runs)"
            for name, runs in sorted(self.errored.items())[:20]
        )
        more = f" and {len(self.errored) - 20} more test(s)" if len(self.errored) > 20 else ""
        return f"{self.errors} run(s) ended in an error: {listed}{more}"

    @property
    def _accuracy_message(self) -> str:
        if self.threshold is None:
            if self.met:
                return f"accuracy {self.accuracy:.1%}; no minimum configured: every run passed"
            return (
                f"accuracy {self.accuracy:.1%}; no minimum configured, so every run must pass: "
                f"{len(self.below)} test(s) did not"
            )
        if self.mode == "all":
            if not self.below:
                return f"every test at or above {self.threshold:.1%}"
            listed = ", ".join(f"{name}: {value:.1%}" for name, value in self.below[:20])
            return f"{len(self.below)} test(s) below threshold {self.threshold:.1%}: {listed}"
        verdict = "meets" if self.met else "is below"
        return f"average accuracy {self.accuracy:.1%} {verdict} the minimum {self.threshold:.1%}"


def accuracy_gate(
    accuracies: dict[str, float],
    threshold: float | None,
    mode: ThresholdMode = "average",
    *,
    errored: Mapping[str, int] | None = None,
    allow_errors: bool = False,
) -> AccuracyGate:
    """The verdict of an evaluation, the one its results file, its summary, its exit code
    and the `min_accuracy` asset check give. oxy's semantics: `average` needs the mean of
    the tests' accuracies to reach the threshold, `all` needs every test to reach it. No
    threshold: every run must pass (each test at 100%), as `eval-pipeline test` exits 0
    only when they all did.

    Args:
        errored: test → its runs that ended as `error` (none left out of `accuracies`,
            where they count as not passed).
        allow_errors: error runs only count as not passed; otherwise any error run fails
            the gate as an incomplete evaluation, whatever the accuracy.
    """
    errored = {name: runs for name, runs in (errored or {}).items() if runs}
    average = sum(accuracies.values()) / len(accuracies) if accuracies else 0.0
    if threshold is None:
        below = sorted((name, value) for name, value in accuracies.items() if value + 1e-12 < 1)
        return AccuracyGate(not below, average, None, mode, below, errored, allow_errors)
    below = sorted((name, value) for name, value in accuracies.items() if value + 1e-12 < threshold)
    met = not below if mode == "all" else average + 1e-12 >= threshold
    below = below if mode == "all" else []
    return AccuracyGate(met, average, threshold, mode, below, errored, allow_errors)


SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class DayDiff:
    """Cases of one model compared between two days (a case passes when all its attempts pass).
    `base` is None when there is no earlier day to compare with. `paired`: the paired test
    of the head day (A) against the base day (B) on their shared tests — a_only: tests
    better on the head day, b_only: better on the base day (None without a base)."""

    model: str
    base: date | None
    head: date
    improved: list[str]
    regressed: list[str]
    still_failing: list[str]
    base_found: bool
    paired: PairedComparison | None = None
    #: Tests whose runs on the head day ended in an error and none failed: no verdict, so
    #: neither regressed nor still failing (`PairChange.change`, as the diff of files says).
    errors: list[str] = field(default_factory=list)

    @property
    def significant_drop(self) -> bool:
        """The head day did worse than the base day beyond noise (two-sided p < 0.05)."""
        paired = self.paired
        return (
            paired is not None and paired.b_only > paired.a_only and paired.p_value < SIGNIFICANCE
        )

    @property
    def paired_line(self) -> str:
        """E.g. "paired test: 3 better, 1 worse on 40 shared tests, p = 0.62 (not significant)"."""
        paired = self.paired
        if paired is None or paired.tests == 0:
            return "paired test: no shared test"
        verdict = "significant" if paired.p_value < SIGNIFICANCE else "not significant"
        return (
            f"paired test: {paired.a_only} better, {paired.b_only} worse on {paired.tests} "
            f"shared tests, p = {paired.p_value:.3f} ({verdict})"
        )

    @property
    def message(self) -> str:
        """One line for the no_regression check: what regressed, since which day."""
        if self.regressed:
            return f"regressed since {self.base}: " + ", ".join(self.regressed)
        if self.base_found:
            return f"no regression since {self.base}"
        return "no earlier evaluated day to compare with"


def case_attempts(layout: StateFolder, model: str, day: date) -> dict[str, list[str]]:
    """Test → the status of each of its attempts (`passed`, `failed`, `error`), in order."""
    rows = sorted(
        read_latest(layout, "grades", model=model, run_date=day), key=lambda r: r["attempt"]
    )
    attempts: dict[str, list[str]] = {}
    for row in rows:
        attempts.setdefault(row["name"], []).append(_status(row))
    return attempts


def _status(row: Mapping[str, Any]) -> str:
    status = row.get("status")
    if status in ("passed", "failed", "error"):
        return status
    return "passed" if row["passed"] else "failed"


def _passes(statuses: Sequence[str]) -> list[bool]:
    return [status == "passed" for status in statuses]


def diff_days(
    layout: StateFolder,
    model: str,
    base: date,
    head: date,
    *,
    names: Sequence[str] | None = None,
    head_attempts: Mapping[str, Sequence[str]] | None = None,
) -> DayDiff:
    """How each test shared by both days changed (`PairChange.change`, the rule of the diff
    of results files): a test now in error is an error, not a regression. `head_attempts`:
    the head day's attempt statuses per test when the caller holds them already (read from
    the store otherwise)."""
    base_attempts = case_attempts(layout, model, base)
    if head_attempts is None:
        head_attempts = case_attempts(layout, model, head)
    shared = [n for n in head_attempts if n in base_attempts and (names is None or n in names)]
    changes = {
        n: PairChange(
            n,
            model,
            attempts_outcome(base_attempts[n]),
            attempts_outcome(head_attempts[n]),
        )
        for n in shared
    }

    def named(kind: str) -> list[str]:
        return sorted(n for n, change in changes.items() if change.change == kind)

    return DayDiff(
        model=model,
        base=base,
        head=head,
        improved=named(FIX),
        regressed=named(REGRESSION),
        still_failing=sorted(
            n for n, c in changes.items() if c.change == UNCHANGED and c.after != "passed"
        ),
        base_found=bool(base_attempts),
        paired=compare_models(
            {n: _passes(head_attempts[n]) for n in shared},
            {n: _passes(base_attempts[n]) for n in shared},
            model_a=f"{model}@{head}",
            model_b=f"{model}@{base}",
        ),
        errors=named(ERROR),
    )


# "Regressed" has two meanings a user needs, each defined once here:
# * since the model's previous evaluated day (`since_previous_day`): the no_regression check,
#   `eval-pipeline diff`, the viewer and the `regressions` history mart (`regressions_sql`);
# * since the previous run (`since_previous_run`): the immediate feedback of `eval-pipeline test`.


def first_evaluated_day(layout: StateFolder) -> date | None:
    """The first day any model has runs in the store (None before the suite's first evaluation)."""
    if not layout.tables_dir.exists():
        return None  # nothing stored yet: no need to create the results database to say so
    frame = query(layout, "SELECT CAST(min(run_date) AS VARCHAR) AS day FROM agent_runs")
    value = frame["day"][0]
    return date.fromisoformat(value) if isinstance(value, str) else None


def since_previous_day(
    layout: StateFolder,
    model: str,
    day: date,
    *,
    head_attempts: Mapping[str, Sequence[str]] | None = None,
) -> DayDiff:
    """The model's tests on `day` against its previous evaluated day: a test regressed when
    every attempt passed then and some attempt failed now (runs that only ended in errors
    are `errors`: they say nothing of the agent). A day skipped (a weekend, a
    model not run) is no gap: the comparison is with the last day that has results.
    `head_attempts` as in `diff_days`."""
    base = previous_graded_day(layout, model, day)
    if base is None:
        return DayDiff(model, None, day, [], [], [], base_found=False)
    return diff_days(layout, model, base, day, head_attempts=head_attempts)


@dataclass(frozen=True)
class PartitionChecks:
    """The checks of one model's day: minimum accuracy and no regression since its previous
    evaluated day (the asset checks of `model_summaries`). With `significant_only`, the
    no_regression check fails only on a significant drop (`test.regression`)."""

    accuracy: AccuracyGate
    regression: DayDiff
    significant_only: bool = False

    @property
    def regression_passed(self) -> bool:
        if self.significant_only:
            return not self.regression.significant_drop
        return not self.regression.regressed

    @property
    def regression_message(self) -> str:
        message = self.regression.message
        if self.significant_only and self.regression.paired is not None:
            message += f"; {self.regression.paired_line}"
            if self.regression.regressed and self.regression_passed:
                message += ", so no significant drop (test.regression.significant_only)"
        return message


def check_partition(
    layout: StateFolder,
    model: str,
    day: date,
    cases: Sequence[CaseMetrics],
    *,
    min_accuracy: float | None,
    mode: ThresholdMode,
    significant_only: bool = False,
    allow_errors: bool = False,
) -> PartitionChecks:
    """Both checks of a partition from its per-test metrics (`summarize_partition`'s, so the
    partition's grades are read once); only the previous day's grades are read here.
    `significant_only`: no_regression fails only on a significant drop (`test.regression`).
    `allow_errors`: error runs count as not passed instead of failing min_accuracy
    (`test.allow_errors`), as in `eval-pipeline test`'s gate."""
    accuracies = {case.name: case.pass_at_1 for case in cases}  # as `eval-pipeline test`'s gate
    # The outcome and pass@1 are all the diff needs of an attempt list: the order is immaterial.
    attempts = {
        case.name: ["passed"] * case.passes
        + ["error"] * case.errors
        + ["failed"] * (case.attempts - case.passes - case.errors)
        for case in cases
    }
    return PartitionChecks(
        accuracy=accuracy_gate(
            accuracies,
            min_accuracy,
            mode,
            errored={case.name: case.errors for case in cases},
            allow_errors=allow_errors,
        ),
        regression=since_previous_day(layout, model, day, head_attempts=attempts),
        significant_only=significant_only,
    )


@cache
def _regressions_template() -> str:
    model = resources.files("eval_pipeline") / "history_dbt" / "models" / "regressions.sql"
    return model.read_text(encoding="utf-8")


def regressions_sql(grades: str) -> str:
    """`since_previous_day` over all history as SQL on a `grades` relation: the history mart
    `regressions` (the same file, which dbt renders). One row per test, model and day that
    regressed: name, model, run_date, previous_date, attempts, attempt (the first that did not
    pass), status, first_failure (its message)."""
    return _regressions_template().replace("{{ source('results', 'grades') }}", grades)


@dataclass(frozen=True)
class RunChanges:
    """Tests whose verdict changed since the model's previous run. A change that came with a
    new judge is the judge's, not the model's: it is in `rejudged`, neither regressed nor
    improved ("name (passed → not passed; judge A → B)"). `causes`: for a changed test, what
    changed besides the agent's answer (`CAUSES`), e.g. `["reference SQL"]` when the same
    stored run was regraded against an edited reference."""

    regressed: list[str]
    improved: list[str]
    rejudged: list[str] = field(default_factory=list)
    causes: dict[str, list[str]] = field(default_factory=dict)
    # A changed test one of whose sides is an `error`: what the error said nothing about
    # (an error has no data check to compare) is not a cause; the error is.
    errors: dict[str, str] = field(default_factory=dict)
    # Changes against runs another tool graded (imported from nao): its rules are not ours
    # (nao compares rows in any order), so such a change is the rules', not the model's.
    # Grader (`nao 0.3.29`) → "name (passed → not passed)".
    by_rules: dict[str, list[str]] = field(default_factory=dict)

    def label(self, name: str) -> str:
        """`name`, or `name (reference SQL changed)` when something besides the answer did,
        `name (the previous run was an error)` when that is why."""
        parts = [self.errors[name]] if name in self.errors else []
        if causes := self.causes.get(name):
            parts.append(f"{', '.join(causes)} changed")
        return f"{name} ({'; '.join(parts)})" if parts else name


def _foreign_grader(rows: Sequence[Mapping]) -> str | None:
    """The other tool that graded these runs (imported from its results file), if any."""
    graders = [r.get("imported_from") for r in rows]
    foreign = sorted(g for g in graders if isinstance(g, str) and g != OURS)
    return foreign[0] if foreign else None


# What can change a verdict besides the agent's answer, in the order they are named.
CAUSES = (
    "test",
    "reference SQL",
    "reference result",
    "tolerance",
    "extraction",
    "grading code",
    "context",
)
# The grading rules (`GradingRules.parts`) a grade keeps that name a cause of their own; the
# judge is told apart as `rejudged`, a tolerance by the comparison the data check applied.
_RULE_CAUSES = ("extraction", "grading code")


def _verdict(passed: bool) -> str:
    return "passed" if passed else "not passed"


_GRADE_COLUMNS = (
    "name, attempt, passed, status, judge, run_key, content_hash, checks, grading_rules, "
    "imported_from"
)


def since_previous_run(
    layout: StateFolder, model: str, day: date, names: Sequence[str]
) -> RunChanges | None:
    """The immediate feedback of an evaluation: the tests `names` as graded now on `day`
    against the model's grades written just before these (any day, whatever was evaluated
    then). A test counts when both have it; None when the model has no grades on `day`."""
    now = _records(
        layout,
        f"SELECT {_GRADE_COLUMNS}, written_at FROM grades WHERE model = ? AND run_date = ?",
        [model, day],
    )
    if not now:
        return None
    written: datetime = min(row["written_at"] for row in now)
    before = _records(
        layout,
        f"""
        WITH previous AS (
            SELECT max(written_at) AS at FROM grades_history WHERE model = ? AND written_at < ?
        )
        SELECT {_GRADE_COLUMNS}
        FROM grades_history, previous
        WHERE model = ? AND written_at = previous.at
        """,
        [model, written, model],
    )
    rows_now, rows_before = _by_test(now), _by_test(before)
    passed_now = {n: all(r["passed"] for r in rows) for n, rows in rows_now.items()}
    passed_before = {n: all(r["passed"] for r in rows) for n, rows in rows_before.items()}
    judge_now = {n: _judge(rows) for n, rows in rows_now.items()}
    judge_before = {n: _judge(rows) for n, rows in rows_before.items()}
    changed = [
        n
        for n in names
        if n in passed_now and n in passed_before and passed_now[n] != passed_before[n]
    ]
    # Graded by other rules on one side (nao's, imported): the change is the rules'.
    by_rules: dict[str, list[str]] = {}
    for n in list(changed):
        before, now = _foreign_grader(rows_before[n]), _foreign_grader(rows_now[n])
        if before != now:
            changed.remove(n)
            by_rules.setdefault(before or now or "", []).append(
                f"{n} ({_verdict(passed_before[n])} → {_verdict(passed_now[n])})"
            )
    inputs = _run_inputs(
        layout, {r["run_key"] for n in changed for r in rows_now[n] + rows_before[n]}
    )
    causes = {n: _causes(rows_before[n], rows_now[n], inputs) for n in changed}
    # A new extraction brings the judge in (or out) as the data check's extractor: that is the
    # extraction's change, named as such, not a new judge's.
    rejudged = [
        n for n in changed if judge_now[n] != judge_before[n] and "extraction" not in causes[n]
    ]
    return RunChanges(
        regressed=[n for n in changed if passed_before[n] and n not in rejudged],
        improved=[n for n in changed if passed_now[n] and n not in rejudged],
        rejudged=[
            f"{n} ({_verdict(passed_before[n])} → {_verdict(passed_now[n])}; judge "
            f"{judge_before[n] or 'none'} → {judge_now[n] or 'none'})"
            for n in rejudged
        ],
        causes={n: found for n, found in causes.items() if found and n not in rejudged},
        errors={
            n: why
            for n in changed
            if n not in rejudged and (why := _error_side(rows_before[n], rows_now[n]))
        },
        by_rules=by_rules,
    )


def _error_side(before: Sequence[Mapping], now: Sequence[Mapping]) -> str | None:
    """Which of two gradings of a test was an `error`, said as the cause of the change."""
    if any(r.get("status") == "error" for r in before):
        return "the previous run was an error"
    if any(r.get("status") == "error" for r in now):
        return "this run is an error"
    return None


def _records(layout: StateFolder, sql: str, parameters: list) -> list[dict[str, Any]]:
    """The rows of `sql` as dicts of DuckDB's own values: a day's grades taken as a
    DataFrame's records cost a tenth of a second more for three models of 500 tests."""
    columns, rows = fetch(layout, sql, parameters)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _by_test(records: Sequence[dict]) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in records:
        rows.setdefault(row["name"], []).append(row)
    return rows


def _judge(rows: Sequence[Mapping]) -> str | None:
    judges = [r["judge"] for r in rows if isinstance(r["judge"], str)]
    return max(judges) if judges else None


def _run_inputs(layout: StateFolder, keys: set[str]) -> dict[str, tuple[str, str]]:
    """Run key → (input hash, context hash) of those runs, from every run ever stored."""
    if not keys:
        return {}
    frame = query(
        layout,
        "SELECT DISTINCT key, input_hash, context_hash FROM agent_runs_history "
        "WHERE list_contains(?, key)",
        [sorted(keys)],
    )
    return {k: (i, c) for k, i, c in frame.itertuples(index=False)}


def _rules(row: Mapping) -> dict:
    """The grading rules' digests a grade was made under ({} for a grade older than them)."""
    rules = row.get("grading_rules")
    if isinstance(rules, str):
        try:
            rules = json.loads(rules)
        except ValueError:
            return {}
    return rules if isinstance(rules, dict) else {}


def _data_check(row: Mapping) -> dict:
    checks = row["checks"]
    if isinstance(checks, str):
        try:
            checks = json.loads(checks)
        except ValueError:
            return {}
    for check in checks or []:
        if isinstance(check, dict) and check.get("kind") == "data":
            return check.get("details") or {}
    return {}


def _data_check_causes(was: Mapping, is_: Mapping) -> set[str]:
    """What changed between two data checks of a test besides the answer."""
    found: set[str] = set()
    if (was.get("reference_sql") or "").strip() != (is_.get("reference_sql") or "").strip():
        found.add("reference SQL")
    elif was.get("expected_data") != is_.get("expected_data"):
        found.add("reference result")  # the same SQL answers differently: the warehouse
    if (was.get("comparison"), was.get("ordered")) != (is_.get("comparison"), is_.get("ordered")):
        found.add("tolerance")
    return found


def _causes(
    before: Sequence[Mapping], now: Sequence[Mapping], inputs: Mapping[str, tuple[str, str]]
) -> list[str]:
    """What changed between two gradings of a test besides the agent's answer (`CAUSES`)."""
    found: set[str] = set()
    earlier = {r["attempt"]: r for r in before}
    for row in now:
        old = earlier.get(row["attempt"])
        if old is None:
            continue
        if old["content_hash"] != row["content_hash"]:
            found.add("test")
        # An error was not compared with the reference: its grade holds no data check to
        # compare with (`_error_side` names the error instead).
        if "error" not in (old.get("status"), row.get("status")):
            found.update(_data_check_causes(_data_check(old), _data_check(row)))
        rules_was, rules_is = _rules(old), _rules(row)
        if rules_was and rules_is:
            found.update(c for c in _RULE_CAUSES if rules_was.get(c) != rules_is.get(c))
        old_inputs, new_inputs = inputs.get(old["run_key"]), inputs.get(row["run_key"])
        # An imported run has no context hash: nothing to tell about its context.
        contexts = (old_inputs[1], new_inputs[1]) if old_inputs and new_inputs else (None, None)
        if None not in contexts and contexts[0] != contexts[1]:
            found.add("context")
    # "test" says only what the named parts do not: an edited reference is a test edit too.
    if found & {"reference SQL", "tolerance"}:
        found.discard("test")
    return [cause for cause in CAUSES if cause in found]

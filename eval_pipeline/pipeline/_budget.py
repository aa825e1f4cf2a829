"""Attempts under a budget: rounds of runs that go where the answer to the user's question is still open.

The first round runs each selected test once per model (more where a test sets its own `k`
or a consistency check's `n`). After each round the graded runs decide the question
(`grading.decide`: anytime-valid, so looking after every round keeps the stated error);
while it is open and the budget lasts, `grading.next_round` names the (model, test) pairs
whose next attempt is most informative and the next round runs them. Every round is an
ordinary evaluation of the day (partitions, cache, lineage), whose plan names the extra
attempts (`EvaluationRequest.attempts`).

The rounds are a deterministic function of the graded runs: `_replay` walks them from the
first round over the outcomes already stored. So a rerun of the day with the same budget
starts from the attempts the last one stored, replays the same rounds over them and runs
only what is missing; unchanged, it runs nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from eval_pipeline.grading import (
    BudgetDecision,
    BudgetQuestion,
    decide,
    next_round,
)
from eval_pipeline.pipeline._dagster_home import instance_home
from eval_pipeline.pipeline._evaluation import EvaluationRequest, EvaluationResult
from eval_pipeline.pipeline._runs import attempts_for
from eval_pipeline.pipeline._unchanged import LastEvaluation
from eval_pipeline.store import (
    StateFolder,
    ensure_schema_files,
    query,
    read_latest,
    write_rows,
)
from eval_pipeline.suite import AttemptBudget, Problem, Suite, SuiteError

__all__ = [
    "BudgetOutcome",
    "BudgetSpent",
    "forget_budget",
    "round_size",
    "spend_budget",
    "stored_budget",
]

Plan = dict[tuple[str, str], int]
"""(model, test) → attempts."""

Outcomes = Mapping[str, Mapping[str, Sequence["_Outcome"]]]
"""model → test → the stored outcome of each attempt, from the first, while they are graded."""


@dataclass(frozen=True)
class _Outcome:
    passed: bool
    cost_usd: float | None


class BudgetSpent(SuiteError):
    """The budget cannot be spent as asked (too small for a first round, no prices for
    `--budget-usd`); nothing beyond the first round was run."""


def round_size(first_round: int, models: int) -> int:
    """Runs per round after the first: half a first round (at least two per model). Small
    enough that the attempts go to the tests that decide and the decision is looked at often
    enough to stop soon after it is reached; large enough that the rounds (each a Dagster
    run per model) stay few."""
    return max(2 * models, math.ceil(first_round / 2))


@dataclass(frozen=True)
class BudgetOutcome:
    """What an attempt budget spent and decided on the day."""

    budget: AttemptBudget
    question: BudgetQuestion
    decision: BudgetDecision
    spent_runs: int
    spent_usd: float | None
    rounds: int
    #: (model, test, attempts, why the last attempt was given: "" for the first round's)
    attempts: tuple[tuple[str, str, int, str], ...] = field(default=())

    def sentences(self) -> list[str]:
        """The decision as a person reads it: one line per pair of models (compare), or per
        model's pass-rate interval (pass_rate)."""
        if self.question.kind == "compare":
            return [c.sentence(spent=self.spent_runs) for c in self.decision.comparisons]
        lines = []
        for rate in self.decision.pass_rates:
            within = rate.width <= self.question.width
            verdict = "within" if within else "not yet within"
            lines.append(
                f"{rate.model}: pass rate {rate.low:.0%}–{rate.high:.0%} (anytime-valid, "
                f"α = {self.question.alpha:g}), {verdict} the width {self.question.width:g} "
                f"after {rate.attempts} runs"
            )
        return lines

    def spent_by_model(self) -> dict[str, int]:
        spent: dict[str, int] = defaultdict(int)
        for model, _test, attempts, _reason in self.attempts:
            spent[model] += attempts
        return dict(spent)

    def to_json(self) -> dict[str, Any]:
        """The results file's `budget` (ours, beside nao's keys)."""
        return {
            "runs": self.budget.runs,
            "usd": self.budget.usd,
            "question": self.question.kind,
            "alpha": self.question.alpha,
            "width": self.question.width if self.question.kind == "pass_rate" else None,
            "spent_runs": self.spent_runs,
            "spent_usd": self.spent_usd,
            "rounds": self.rounds,
            "decided": self.decision.decided,
            "decision": self.sentences(),
            "comparisons": [
                {
                    "model_a": c.model_a,
                    "model_b": c.model_b,
                    "a_wins": c.a_wins,
                    "b_wins": c.b_wins,
                    "e_value": c.e_value,
                    "alpha": c.alpha,
                    "better": c.better,
                    "runs_to_decide": c.runs_to_decide,
                }
                for c in self.decision.comparisons
            ],
            "pass_rates": [
                {"model": r.model, "low": r.low, "high": r.high, "runs": r.attempts}
                for r in self.decision.pass_rates
            ],
            "spent_by_model": self.spent_by_model(),
            "attempts": [
                {"model": m, "name": t, "attempts": n, "reason": reason or None}
                for m, t, n, reason in self.attempts
            ],
        }


@dataclass
class _Replay:
    plan: Plan
    reasons: dict[tuple[str, str], tuple[str, int]]
    rounds: int
    finished: bool
    decision: BudgetDecision | None = None
    spent_usd: float | None = None


def _question(budget: AttemptBudget, models: int) -> BudgetQuestion:
    return BudgetQuestion(kind=budget.question_for(models), alpha=budget.alpha, width=budget.width)


def _first_round(suite: Suite, request: EvaluationRequest) -> Plan:
    cases = suite.select(list(request.select) or None)
    return {(model, case.name): attempts_for(case, 1) for model in request.models for case in cases}


def _replay(
    first: Plan,
    known: Outcomes,
    budget: AttemptBudget,
    question: BudgetQuestion,
    models: Sequence[str],
    *,
    missing_failed: bool = False,
) -> _Replay:
    """The budget's rounds over the outcomes `known`, from the first round, until the question
    is decided, the budget spent, or a round needs a run `known` does not hold (then
    `finished` is False and `plan` is that round's). With `missing_failed`, a run with no
    grade counts as failed (an error, as the results report it) instead."""
    plan: Plan = dict(first)
    reasons: dict[tuple[str, str], tuple[str, int]] = {}
    rounds = 1
    step = round_size(sum(first.values()), len(models))
    missing = _Outcome(passed=False, cost_usd=0.0)
    while True:
        outcomes = {
            (model, test): list(known.get(model, {}).get(test, ()))[:n]
            for (model, test), n in plan.items()
        }
        if any(len(outcomes[key]) < n for key, n in plan.items()):
            if not missing_failed:
                return _Replay(plan, reasons, rounds, finished=False)
            for key, n in plan.items():
                outcomes[key] += [missing] * (n - len(outcomes[key]))
        attempts: dict[str, dict[str, list[bool]]] = {model: {} for model in models}
        for (model, test), tries in outcomes.items():
            attempts[model][test] = [t.passed for t in tries]
        decision = decide(attempts, question)
        costs = [t.cost_usd for tries in outcomes.values() for t in tries]
        spent_usd = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        left = _runs_left(budget, sum(plan.values()), spent_usd, len(costs))
        given = (
            []
            if decision.decided or left <= 0
            else next_round(attempts, question, runs=min(step, left))
        )
        if not given:
            return _Replay(plan, reasons, rounds, True, decision, spent_usd)
        rounds += 1
        for allocation in given:
            key = (allocation.model, allocation.test)
            plan[key] = max(plan.get(key, 0), allocation.attempts)
            reasons[key] = (allocation.reason, rounds)


def _runs_left(budget: AttemptBudget, spent: int, spent_usd: float | None, runs: int) -> int:
    """Runs the budget has left (a large number when only dollars bound it and runs are free)."""
    left = math.inf
    if budget.runs is not None:
        left = budget.runs - spent
    if budget.usd is not None:
        if spent_usd is None:
            raise BudgetSpent(
                [
                    Problem(
                        "--budget-usd",
                        None,
                        "a run has no cost: a model without prices (give its `costs:` in "
                        "eval_config.yaml) cannot be budgeted in dollars; use --budget RUNS",
                    )
                ],
                headline="the attempt budget cannot be spent",
            )
        per_run = spent_usd / runs if runs else 0.0
        if per_run > 0:
            left = min(left, math.floor((budget.usd - spent_usd) / per_run))
    return int(left) if left != math.inf else 1_000_000


def _known(
    layout: StateFolder, run_date: date, models: Sequence[str], names: Sequence[str]
) -> Outcomes:
    """The day's graded runs of these models and tests, with their costs."""
    frame = query(
        layout,
        "SELECT model, name, attempt, status, cost_usd FROM grades WHERE run_date = ? "
        "AND list_contains(?, model) AND list_contains(?, name) ORDER BY model, name, attempt",
        [run_date, list(models), list(names)],
    )
    known: dict[str, dict[str, list[_Outcome]]] = defaultdict(lambda: defaultdict(list))
    for row in frame.to_dict("records"):
        tries = known[row["model"]][row["name"]]
        if int(row["attempt"]) != len(tries):
            continue  # a gap: the attempts after it wait for it
        cost = row["cost_usd"]
        cost = None if cost is None or (isinstance(cost, float) and math.isnan(cost)) else cost
        tries.append(_Outcome(row["status"] == "passed", cost))
    return known


def stored_budget(layout: StateFolder, run_date: date) -> BudgetOutcome | None:
    """What the day's attempt budget spent and decided, from the store (its `attempt_budgets`
    rows and the grades of their runs); None when no budget evaluated the day. What the
    viewer, the summaries' and the report's metadata show."""
    rows = read_latest(layout, "attempt_budgets", run_date=run_date)
    if not rows:
        return None
    first = rows[0]
    budget = AttemptBudget(
        runs=None if first["budget_runs"] is None else int(first["budget_runs"]),
        usd=None if _same_float(first["budget_usd"], None) else float(first["budget_usd"]),
        question=first["question"],
        alpha=float(first["alpha"]),
        width=float(first["width"]),
    )
    models = list(dict.fromkeys(row["model"] for row in rows))
    plan = {(row["model"], row["name"]): int(row["attempts"]) for row in rows}
    reasons = {(row["model"], row["name"]): row["reason"] or "" for row in rows}
    names = sorted({row["name"] for row in rows})
    known = _known(layout, run_date, models, names)
    outcomes = {key: list(known.get(key[0], {}).get(key[1], ()))[:n] for key, n in plan.items()}
    attempts: dict[str, dict[str, list[bool]]] = {model: {} for model in models}
    for (model, test), tries in outcomes.items():
        # A run with no grade (yet) counts as failed, as the results report it.
        attempts[model][test] = [t.passed for t in tries] + [False] * (
            plan[model, test] - len(tries)
        )
    costs = [t.cost_usd for tries in outcomes.values() for t in tries]
    question = _question(budget, len(models))
    return BudgetOutcome(
        budget=budget,
        question=question,
        decision=decide(attempts, question),
        spent_runs=sum(plan.values()),
        spent_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        rounds=max(int(row["round"]) for row in rows),
        attempts=tuple(
            (model, test, n, reasons[model, test]) for (model, test), n in sorted(plan.items())
        ),
    )


def forget_budget(layout: StateFolder, run_date: date) -> None:
    """An evaluation of the day without a budget: the day's budget (if any) no longer says
    what its runs are, so its rows go (a new, empty partition file; the old one stays as
    history)."""
    if read_latest(layout, "attempt_budgets", run_date=run_date):
        write_rows(layout, "attempt_budgets", [], run_date=run_date)


def _stored_plan(
    layout: StateFolder, request: EvaluationRequest, budget: AttemptBudget
) -> tuple[Plan, dict[tuple[str, str], tuple[str, int]]]:
    """The attempts (and why) the day's last evaluation under the same budget gave."""
    rows = read_latest(layout, "attempt_budgets", run_date=request.run_date)
    same = [
        row
        for row in rows
        if row["model"] in request.models
        and row["budget_runs"] == budget.runs
        and _same_float(row["budget_usd"], budget.usd)
        and row["question"] == _question(budget, len(request.models)).kind
    ]
    plan = {(row["model"], row["name"]): int(row["attempts"]) for row in same}
    reasons = {
        (row["model"], row["name"]): (row["reason"] or "", int(row["round"])) for row in same
    }
    return plan, reasons


def _same_float(stored: Any, wanted: float | None) -> bool:
    if wanted is None:
        return stored is None or (isinstance(stored, float) and math.isnan(stored))
    return stored is not None and math.isclose(float(stored), wanted)


def _write_plan(
    layout: StateFolder,
    request: EvaluationRequest,
    budget: AttemptBudget,
    plan: Plan,
    reasons: Mapping[tuple[str, str], tuple[str, int]],
) -> None:
    question = _question(budget, len(request.models))
    rows = [
        {
            "run_date": request.run_date,
            "model": model,
            "name": test,
            "attempts": attempts,
            "reason": reasons.get((model, test), ("", 1))[0] or None,
            "round": reasons.get((model, test), ("", 1))[1],
            "budget_runs": budget.runs,
            "budget_usd": budget.usd,
            "question": question.kind,
            "alpha": question.alpha,
            "width": question.width,
        }
        for (model, test), attempts in sorted(plan.items())
    ]
    write_rows(layout, "attempt_budgets", rows, run_date=request.run_date)


def _with_plan(request: EvaluationRequest, first: Plan, plan: Plan) -> EvaluationRequest:
    extra = tuple(
        (model, test, n) for (model, test), n in sorted(plan.items()) if n > first[(model, test)]
    )
    return replace(request, k=1, attempts=extra)


def spend_budget(
    suite: Suite,
    request: EvaluationRequest,
    runner: Callable[[Suite, EvaluationRequest, Callable[[str], None]], EvaluationResult],
    on_stage: Callable[[str], None],
) -> tuple[EvaluationRequest, EvaluationResult, BudgetOutcome]:
    """Run the budget's rounds; the request of the last round (its plan names every extra
    attempt), what ran over all rounds, and what the budget spent and decided.

    Raises:
        BudgetSpent: a budget smaller than the first round, or dollars without prices.
    """
    budget = request.budget
    assert budget is not None
    models = request.models
    question = _question(budget, len(models))
    layout = StateFolder.of(suite.config)
    ensure_schema_files(layout)  # the store of a suite's first evaluation has no table yet
    first = _first_round(suite, request)
    if budget.runs is not None and budget.runs < sum(first.values()):
        raise BudgetSpent(
            [
                Problem(
                    "--budget",
                    None,
                    f"{budget.runs} runs cannot run each selected test once per model "
                    f"({sum(first.values())} runs); give at least that, or select fewer tests",
                )
            ],
            headline="the attempt budget is too small; nothing was run",
        )
    names = sorted({test for _model, test in first})
    # Start where the day's last evaluation under this budget ended: its runs are stored,
    # and the rounds replayed over them name the same ones.
    stored, reasons = _stored_plan(layout, request, budget)
    plan = {key: max(n, stored.get(key, 0)) for key, n in first.items()}
    written = plan if stored.keys() == first.keys() else None
    executed, answerer_changed, run_ids, rounds_run = 0, 0, [], 0
    home = instance_home(suite.config)
    while True:
        round_request = replace(_with_plan(request, first, plan), budget_round=rounds_run + 1)
        if written != plan:
            # Before the round's runs: its summaries show why each attempt was given.
            _write_plan(layout, request, budget, plan, reasons)
            written = dict(plan)
        ran_now = LastEvaluation(suite, round_request, home).reused() is None
        if ran_now:
            rounds_run += 1
            ran = runner(suite, round_request, on_stage)
            executed += ran.executed
            answerer_changed += ran.answerer_changed
            run_ids += ran.run_ids
        known = _known(layout, request.run_date, models, names)
        replay = _replay(first, known, budget, question, models)
        if not replay.finished and replay.plan == plan:
            # The round ran and a run still has no grade: it counts as failed, as the
            # results report it, rather than asking for it forever.
            replay = _replay(first, known, budget, question, models, missing_failed=True)
        if replay.finished and replay.plan == plan:
            break
        more = sum(replay.plan.values()) - sum(plan.values())
        on_stage(
            f"attempt budget, round {replay.rounds}: {max(more, 0)} more run(s) where the "
            f"answer is open ({sum(replay.plan.values())} of {budget.runs or 'the budget'} runs)"
        )
        plan, reasons = replay.plan, replay.reasons
    assert replay.decision is not None
    total = sum(plan.values())
    outcome = BudgetOutcome(
        budget=budget,
        question=question,
        decision=replay.decision,
        spent_runs=total,
        spent_usd=replay.spent_usd,
        rounds=replay.rounds,
        attempts=tuple(
            (model, test, n, replay.reasons.get((model, test), ("", 1))[0])
            for (model, test), n in sorted(plan.items())
        ),
    )
    ran = EvaluationResult(
        executed=executed,
        reused=max(total - executed, 0),
        answerer_changed=answerer_changed,
        run_ids=run_ids,
    )
    return _with_plan(request, first, plan), ran, outcome

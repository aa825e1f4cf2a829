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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from eval_pipeline.grading import BudgetDecision, BudgetQuestion, decide, next_round
from eval_pipeline.pipeline._budget_outcome import (
    BudgetOutcome,
    Outcomes,
    Plan,
    budget_question,
    planned_outcomes,
    spent_usd,
)
from eval_pipeline.pipeline._budget_store import graded_outcomes, read_plan, write_plan
from eval_pipeline.pipeline._dagster_home import instance_home
from eval_pipeline.pipeline._evaluation import EvaluationRequest, EvaluationResult, Runner
from eval_pipeline.pipeline._runs import attempts_for
from eval_pipeline.pipeline._unchanged import LastEvaluation
from eval_pipeline.store import StateFolder, ensure_schema_files
from eval_pipeline.suite import AttemptBudget, Problem, Suite, SuiteError

__all__ = ["BudgetSpent", "round_size", "spend_budget"]


class BudgetSpent(SuiteError):
    """The budget cannot be spent as asked (too small for a first round, no prices for
    `--budget-usd`); nothing beyond the first round was run."""


def round_size(first_round: int, models: int) -> int:
    """Runs per round after the first: half a first round (at least two per model). Small
    enough that the attempts go to the tests that decide and the decision is looked at often
    enough to stop soon after it is reached; large enough that the rounds (each a Dagster
    run per model) stay few."""
    return max(2 * models, math.ceil(first_round / 2))


@dataclass
class _Replay:
    plan: Plan
    reasons: dict[tuple[str, str], tuple[str, int]]
    rounds: int
    finished: bool
    decision: BudgetDecision | None = None


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
    while True:
        attempts, costs = planned_outcomes(plan, known, models, missing_failed=missing_failed)
        if attempts is None:
            return _Replay(plan, reasons, rounds, finished=False)
        decision = decide(attempts, question)
        left = _runs_left(budget, sum(plan.values()), spent_usd(costs), len(costs))
        given = (
            []
            if decision.decided or left <= 0
            else next_round(attempts, question, runs=min(step, left))
        )
        if not given:
            return _Replay(plan, reasons, rounds, True, decision)
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
            runs_instead = "--budget RUNS" if budget.configured_in is None else "test.budget.runs"
            raise BudgetSpent(
                [
                    Problem(
                        *budget.given_as("usd"),
                        "a run has no cost: a model without prices (give its `costs:` in "
                        f"eval_config.yaml) cannot be budgeted in dollars; use {runs_instead}",
                    )
                ],
                headline="the attempt budget cannot be spent",
            )
        per_run = spent_usd / runs if runs else 0.0
        if per_run > 0:
            left = min(left, math.floor((budget.usd - spent_usd) / per_run))
    return int(left) if left != math.inf else 1_000_000


def _with_plan(request: EvaluationRequest, first: Plan, plan: Plan) -> EvaluationRequest:
    extra = tuple(
        (model, test, n) for (model, test), n in sorted(plan.items()) if n > first[(model, test)]
    )
    return replace(request, k=1, attempts=extra)


def spend_budget(
    suite: Suite,
    request: EvaluationRequest,
    runner: Runner,
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
    question = budget_question(budget, len(models))
    layout = StateFolder.of(suite.config)
    ensure_schema_files(layout)  # the store of a suite's first evaluation has no table yet
    first = _first_round(suite, request)
    if budget.runs is not None and budget.runs < sum(first.values()):
        raise BudgetSpent(
            [
                Problem(
                    *budget.given_as("runs"),
                    f"{budget.runs} runs cannot run each selected test once per model "
                    f"({sum(first.values())} runs); give at least that, or select fewer tests",
                )
            ],
            headline="the attempt budget is too small; nothing was run",
        )
    names = sorted({test for _model, test in first})
    # Start where the day's last evaluation under this budget ended: its runs are stored,
    # and the rounds replayed over them name the same ones.
    stored = read_plan(layout, request.run_date)
    same = stored is not None and stored.same_budget(budget, models)
    reasons = dict(stored.reasons) if same else {}
    plan = {key: max(n, stored.plan.get(key, 0) if same else 0) for key, n in first.items()}
    written = plan if same and stored.plan.keys() == first.keys() else None
    executed, run_ids, rounds_run = 0, [], 0
    causes = EvaluationResult()  # why runs were made or graded again, over the rounds
    notices: list[str] = []
    home = instance_home(suite.config)
    while True:
        round_request = replace(_with_plan(request, first, plan), budget_round=rounds_run + 1)
        if written != plan:
            # Before the round's runs: its summaries show why each attempt was given.
            write_plan(layout, request.run_date, budget, models, plan, reasons)
            written = dict(plan)
        ran_now = LastEvaluation(suite, round_request, home).reused() is None
        if ran_now:
            rounds_run += 1
            ran = runner(suite, round_request, on_stage)
            executed += ran.executed
            causes.add_causes(ran.reruns, ran.regraded)
            run_ids += ran.run_ids
            notices += [notice for notice in ran.notices if notice not in notices]
        known = graded_outcomes(layout, request.run_date, models, names)
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
    outcome = BudgetOutcome.of(budget, models, plan, replay.reasons, known)
    total = outcome.spent_runs
    ran = EvaluationResult(
        executed=executed,
        reused=max(total - executed, 0),
        reruns=causes.reruns,
        regraded=causes.regraded,
        run_ids=run_ids,
        notices=notices,
    )
    return _with_plan(request, first, plan), ran, outcome

"""The day's attempt budget in the store (`attempt_budgets`): written before each round, read by a rerun, the viewer and the Dagster metadata."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from eval_pipeline.pipeline._budget_outcome import (
    AttemptOutcome,
    BudgetOutcome,
    Outcomes,
    Plan,
    Reasons,
    budget_question,
)
from eval_pipeline.store import StateFolder, query, read_latest, write_rows
from eval_pipeline.suite import AttemptBudget

TABLE = "attempt_budgets"


@dataclass(frozen=True)
class StoredPlan:
    """The attempts the day's last budgeted evaluation gave, and under what budget."""

    budget: AttemptBudget
    models: tuple[str, ...]
    plan: Plan
    reasons: Reasons

    def same_budget(self, budget: AttemptBudget, models: Sequence[str]) -> bool:
        """Whether `budget` over `models` asks what this one asked (the rounds then match)."""
        return (
            self.budget.runs == budget.runs
            and _same_dollars(self.budget.usd, budget.usd)
            and budget_question(self.budget, len(self.models)).kind
            == budget_question(budget, len(models)).kind
            and self.budget.alpha == budget.alpha
            and self.budget.width == budget.width
        )


def graded_outcomes(
    layout: StateFolder, run_date: date, models: Sequence[str], names: Sequence[str]
) -> Outcomes:
    """The day's graded runs of these models and tests, with their costs."""
    frame = query(
        layout,
        "SELECT model, name, attempt, status, cost_usd FROM grades WHERE run_date = ? "
        "AND list_contains(?, model) AND list_contains(?, name) ORDER BY model, name, attempt",
        [run_date, list(models), list(names)],
    )
    known: dict[str, dict[str, list[AttemptOutcome]]] = defaultdict(lambda: defaultdict(list))
    for row in frame.to_dict("records"):
        tries = known[row["model"]][row["name"]]
        if int(row["attempt"]) != len(tries):
            continue  # a gap: the attempts after it wait for it
        tries.append(AttemptOutcome(row["status"] == "passed", _number(row["cost_usd"])))
    return known


def read_plan(layout: StateFolder, run_date: date) -> StoredPlan | None:
    """The day's stored attempts (None: no budget evaluated the day)."""
    rows = read_latest(layout, TABLE, run_date=run_date)
    if not rows:
        return None
    first = rows[0]
    runs, usd = _number(first["budget_runs"]), _number(first["budget_usd"])
    budget = AttemptBudget(
        runs=None if runs is None else int(runs),
        usd=usd,
        question=first["question"],
        alpha=float(first["alpha"]),
        width=float(first["width"]),
    )
    return StoredPlan(
        budget=budget,
        models=tuple(dict.fromkeys(row["model"] for row in rows)),
        plan={(row["model"], row["name"]): int(row["attempts"]) for row in rows},
        reasons={
            (row["model"], row["name"]): (row["reason"] or "", int(row["round"])) for row in rows
        },
    )


def write_plan(
    layout: StateFolder,
    run_date: date,
    budget: AttemptBudget,
    models: Sequence[str],
    plan: Plan,
    reasons: Reasons,
) -> None:
    """The day's attempts as the budget's rounds gave them so far."""
    question = budget_question(budget, len(models))
    rows = [
        {
            "run_date": run_date,
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
    write_rows(layout, TABLE, rows, run_date=run_date)


def forget_budget(layout: StateFolder, run_date: date) -> None:
    """An evaluation of the day without a budget: the day's budget (if any) no longer says
    what its runs are, so its rows go (a new, empty partition file; the old one stays as
    history)."""
    if read_latest(layout, TABLE, run_date=run_date):
        write_rows(layout, TABLE, [], run_date=run_date)


def stored_budget(layout: StateFolder, run_date: date) -> BudgetOutcome | None:
    """What the day's attempt budget spent and decided, from the store (its rows and the
    grades of their runs); None when no budget evaluated the day. What the viewer and the
    summaries' and the report's metadata show."""
    stored = read_plan(layout, run_date)
    if stored is None:
        return None
    names = sorted({test for _model, test in stored.plan})
    known = graded_outcomes(layout, run_date, stored.models, names)
    return BudgetOutcome.of(stored.budget, stored.models, stored.plan, stored.reasons, known)


def _number(value: Any) -> float | None:
    """A stored number, None for a null (pandas reads some as NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _same_dollars(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b))

"""What an attempt budget spent and decided: the value the report, the results file, the viewer and the Dagster metadata show."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.grading import BudgetDecision, BudgetQuestion, decide
from eval_pipeline.suite import AttemptBudget

Plan = dict[tuple[str, str], int]
"""(model, test) → its attempts."""

Reasons = Mapping[tuple[str, str], tuple[str, int]]
"""(model, test) → why its last attempt was given, and in which round."""


@dataclass(frozen=True)
class AttemptOutcome:
    """A graded run as the budget counts it."""

    passed: bool
    cost_usd: float | None


Outcomes = Mapping[str, Mapping[str, Sequence[AttemptOutcome]]]
"""model → test → each graded attempt's outcome, from the first, up to the first not graded."""

_MISSING = AttemptOutcome(passed=False, cost_usd=0.0)


def budget_question(budget: AttemptBudget, models: int) -> BudgetQuestion:
    """What the budget decides for an evaluation of `models` models."""
    return BudgetQuestion(kind=budget.question_for(models), alpha=budget.alpha, width=budget.width)


def planned_outcomes(
    plan: Plan, known: Outcomes, models: Sequence[str], *, missing_failed: bool
) -> tuple[dict[str, dict[str, list[bool]]] | None, list[float | None]]:
    """Each planned attempt's pass (model → test → passed per attempt) and the runs' costs;
    None for the passes when an attempt has no grade, unless `missing_failed` counts it as
    failed (as the results report a run with no grade)."""
    attempts: dict[str, dict[str, list[bool]]] = {model: {} for model in models}
    costs: list[float | None] = []
    for (model, test), n in plan.items():
        tries = list(known.get(model, {}).get(test, ()))[:n]
        if len(tries) < n:
            if not missing_failed:
                return None, []
            tries += [_MISSING] * (n - len(tries))
        attempts[model][test] = [t.passed for t in tries]
        costs += [t.cost_usd for t in tries]
    return attempts, costs


def spent_usd(costs: Sequence[float | None]) -> float | None:
    """What the runs cost together; None when one's cost is unknown."""
    return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)


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

    @classmethod
    def of(
        cls,
        budget: AttemptBudget,
        models: Sequence[str],
        plan: Plan,
        reasons: Reasons,
        known: Outcomes,
    ) -> BudgetOutcome:
        """The outcome of `plan` (the attempts the rounds gave) over the graded runs `known`;
        a planned run with no grade counts as failed, as the results report it."""
        question = budget_question(budget, len(models))
        attempts, costs = planned_outcomes(plan, known, models, missing_failed=True)
        return cls(
            budget=budget,
            question=question,
            decision=decide(attempts, question),
            spent_runs=sum(plan.values()),
            spent_usd=spent_usd(costs),
            rounds=max((round_ for _why, round_ in reasons.values()), default=1),
            attempts=tuple(
                (model, test, n, reasons.get((model, test), ("", 1))[0])
                for (model, test), n in sorted(plan.items())
            ),
        )

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

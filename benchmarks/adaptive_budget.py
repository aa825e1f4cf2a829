"""Benchmark adaptive attempts under a budget against a fixed ten attempts per test.

Run: python benchmarks/adaptive_budget.py --statistics [--days 300] [--seed 20261201]
     python benchmarks/adaptive_budget.py --pipeline [--pipeline-days 4]

Statistics only: simulated suites with known per-test pass probabilities, no pipeline. Each
scenario has 40 tests: most stable (pass probability 0 or 1 for every model, some 0.97 or
0.03), a few flaky with the same probability for every model, and a few deciding tests
where the models differ (none in the null scenarios). Each simulated day draws every
(model, test)'s attempt outcomes once, so the adaptive loop and fixed k = 10 see the same
first attempts. Fixed k = 10: ten attempts per test and model, decided by `compare_models`
with Holm across pairs (`day_comparisons`) at α. Adaptive: one attempt each (round 1), then
`next_round` rounds as `eval-pipeline test --budget` runs them (`pipeline.round_size`: half
a first round, 5% of the fixed runs), stopping when `decide` says decided or at a
budget of 40% of the fixed runs. A decision on a pair of equal models is wrong, and so is
naming the worse model.

Columns: runs as a share of fixed k = 10's (median, mean); `same`, pairs where both methods
say the same (a decision or none); `k10 found`, of the pairs fixed k = 10 decides, the share
the adaptive loop decides the same way; wrong decisions per pair and days with any wrong
decision, fixed k = 10 / adaptive. `same` is below `k10 found` where the adaptive loop
decides pairs fixed k = 10 leaves open: its units are attempts, not tests (see
docs/adaptive-budgets.md).

Targets: on scenarios with a real difference, k10 found ≥ 90% at a median ≤ 40% of its
runs; on every scenario, days with any wrong adaptive decision ≤ α (plus three binomial
standard errors). Where fixed k = 10 decides nothing ("trade wins": A ahead on six tests,
B on two) only the wrong-decision target applies. A last section runs the pass_rate
question on one model, for information.

`--pipeline` runs simulated days through the real pipeline instead (`evaluate` with the
Dagster stages in process, scripted agents over the agent protocol on 127.0.0.1 that answer
each test right with a known probability, `eval_pipeline_tests/pipeline/coin_agents.py`):
per two-model scenario above ("A better", "equal"), each day an
attempt budget of 40% of a fixed k = 10 and that k = 10 (the results file's paired test),
in two stores, on the same answers. It prints the runs the budget spent as a share of
k = 10's, how often the two decided the same, how often each was wrong, and the time of an
adaptive day.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np

# The test helpers (eval_pipeline_tests: the scripted agents) are not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_pipeline.grading import (
    BudgetQuestion,
    day_comparisons,
    decide,
    next_round,
    pass_rate_interval,
)
from eval_pipeline.pipeline import round_size

SEED = 20261201
ALPHA = 0.05
FIXED_ATTEMPTS = 10
BUDGET_SHARE = 0.40


@dataclass(frozen=True)
class Scenario:
    name: str
    probabilities: dict[str, list[float]]  # model → pass probability per test

    @property
    def differs(self) -> bool:
        rows = list(self.probabilities.values())
        return any(row != rows[0] for row in rows[1:])


def _stable(rng: np.random.Generator, count: int) -> list[float]:
    choices = np.array([1.0, 0.0, 0.97, 0.03])
    return [float(p) for p in rng.choice(choices, size=count, p=[0.5, 0.3, 0.12, 0.08])]


def scenarios() -> list[Scenario]:
    """Two and three models, with and without a real difference; 40 tests each."""
    rng = np.random.default_rng(SEED)
    stable, flaky = _stable(rng, 30), [0.5, 0.3, 0.7, 0.6]
    shared = stable + flaky
    deciding = {  # six deciding tests per model, A ahead of B ahead of C
        "http:a": [0.9, 0.95, 0.8, 1.0, 0.9, 0.85],
        "http:b": [0.2, 0.3, 0.1, 0.4, 0.5, 0.3],
        "http:c": [0.0, 0.1, 0.05, 0.0, 0.1, 0.0],
    }
    equal = [0.9, 0.5, 0.4, 1.0, 0.0, 0.2]
    trading = {  # A ahead on six tests, B on two: A the better by suite pass rate
        "http:a": shared[2:] + deciding["http:a"] + [0.1, 0.2],
        "http:b": shared[2:] + deciding["http:b"] + [0.9, 1.0],
    }
    return [
        Scenario("2 models, A better", {m: shared + deciding[m] for m in ("http:a", "http:b")}),
        Scenario("3 models, A > B > C", {m: shared + deciding[m] for m in deciding}),
        Scenario("2 models, trade wins", trading),
        Scenario("2 models, equal", {m: shared + equal for m in ("http:a", "http:b")}),
        Scenario("3 models, equal", {m: shared + equal for m in deciding}),
    ]


def truth(scenario: Scenario, x: str, y: str) -> str | None:
    """The better model of a pair by its suite pass rate, None when they are equal."""
    gap = sum(scenario.probabilities[x]) - sum(scenario.probabilities[y])
    return None if abs(gap) < 1e-12 else (x if gap > 0 else y)


def fixed_decisions(outcomes: dict[str, np.ndarray]) -> dict[tuple[str, str], str | None]:
    attempts = {
        model: {f"t{i}": list(row[:FIXED_ATTEMPTS]) for i, row in enumerate(draws)}
        for model, draws in outcomes.items()
    }
    decisions = {}
    for row in day_comparisons(attempts, alpha=ALPHA):
        x, y = row["model_a"], row["model_b"]
        gap = outcomes[x][:, :FIXED_ATTEMPTS].sum() - outcomes[y][:, :FIXED_ATTEMPTS].sum()
        decisions[x, y] = (x if gap > 0 else y) if row["significant"] else None
    return decisions


def adaptive_day(
    outcomes: dict[str, np.ndarray], question: BudgetQuestion, *, budget_share: float
) -> tuple[dict[str, dict[str, list[bool]]], int]:
    """Round 1, then `next_round` batches until decided or the budget is spent."""
    tests = next(iter(outcomes.values())).shape[0]
    fixed_runs = FIXED_ATTEMPTS * tests * len(outcomes)
    # The rounds `eval-pipeline test --budget` runs: half a first round each.
    batch = round_size(tests * len(outcomes), len(outcomes))
    budget = round(budget_share * fixed_runs)
    attempts = {
        model: {f"t{i}": [bool(draws[i, 0])] for i in range(tests)}
        for model, draws in outcomes.items()
    }
    spent = tests * len(outcomes)
    while spent < budget:
        allocations = next_round(attempts, question, runs=min(batch, budget - spent))
        if not allocations:
            break
        for allocation in allocations:
            tries = attempts[allocation.model][allocation.test]
            row = outcomes[allocation.model][int(allocation.test[1:])]
            while len(tries) < allocation.attempts:
                tries.append(bool(row[len(tries)]))
                spent += 1
    return attempts, spent


def adaptive_decisions(
    outcomes: dict[str, np.ndarray], question: BudgetQuestion
) -> tuple[dict[tuple[str, str], str | None], int]:
    attempts, spent = adaptive_day(outcomes, question, budget_share=BUDGET_SHARE)
    decision = decide(attempts, question)
    return {(c.model_a, c.model_b): c.better for c in decision.comparisons}, spent


def pass_rate_section(days: int, seed: int) -> None:
    """The pass_rate question on one model of the first scenario (informational, no target)."""
    rng = np.random.default_rng(seed + 1)
    probabilities = np.array(scenarios()[0].probabilities["http:a"])
    mean = float(probabilities.mean())
    print(f"\npass_rate, one model, 40 tests, true pass rate {mean:.3f}, width 0.2, α = {ALPHA}")
    print(f"{'budget/k10':>10} {'decided':>8} {'runs/k10 med':>12} {'width med':>9} {'missed':>7}")
    question = BudgetQuestion("pass_rate", alpha=ALPHA, width=0.2)
    fixed_widths = []
    for share in (BUDGET_SHARE, 1.0):
        decided, shares, widths, missed = 0, [], [], 0
        for _ in range(days):
            draws = rng.random((1, probabilities.size, 200)) < probabilities[None, :, None]
            outcomes = {"http:a": draws[0]}
            attempts, spent = adaptive_day(outcomes, question, budget_share=share)
            decision = decide(attempts, question)
            rate = decision.pass_rates[0]
            decided += decision.decided
            shares.append(spent / (FIXED_ATTEMPTS * probabilities.size))
            widths.append(rate.width)
            missed += not rate.low <= mean <= rate.high
            if share == 1.0:
                low, high = pass_rate_interval(list(draws[0][:, :FIXED_ATTEMPTS]))
                fixed_widths.append(high - low)
        print(
            f"{share:>10.0%} {decided / days:>8.0%} {statistics.median(shares):>12.0%} "
            f"{statistics.median(widths):>9.3f} {missed / days:>7.1%}"
        )
    print(
        "fixed k = 10, the day's 95% cluster interval (one look, not anytime-valid): "
        f"median width {statistics.median(fixed_widths):.3f}"
    )


def statistics_section(days: int, seed: int) -> bool:
    """Prints the figures per scenario; True when every target is met."""
    rng = np.random.default_rng(seed)
    question = BudgetQuestion("compare", alpha=ALPHA)
    all_met, compared = True, 0
    started = time.perf_counter()
    print(f"α = {ALPHA}, {days} days per scenario, seed {seed}")
    header = (
        f"{'scenario':<22} {'pairs':>5} {'runs/k10 med':>12} {'mean':>5} {'same':>6} "
        f"{'k10 found':>9} "
        f"{'wrong pairs k10/adapt':>21} {'wrong days k10/adapt':>20}  targets"
    )
    print(header)
    for scenario in scenarios():
        models = list(scenario.probabilities)
        p = np.array([scenario.probabilities[m] for m in models])
        pairs = [(x, y) for i, x in enumerate(models) for y in models[i + 1 :]]
        shares, same, pair_count, fixed_decided, found = [], 0, 0, 0, 0
        wrong = {"fixed": 0, "adaptive": 0}
        wrong_days = {"fixed": 0, "adaptive": 0}
        for _ in range(days):
            # Enough draws for any (model, test) the budget could reach.
            draws = rng.random((len(models), p.shape[1], 200)) < p[:, :, None]
            outcomes = {m: draws[i] for i, m in enumerate(models)}
            fixed = fixed_decisions(outcomes)
            adaptive, spent = adaptive_decisions(outcomes, question)
            shares.append(spent / (FIXED_ATTEMPTS * p.size))
            for method, decisions in (("fixed", fixed), ("adaptive", adaptive)):
                errors = sum(
                    decisions[pair] is not None and decisions[pair] != truth(scenario, *pair)
                    for pair in pairs
                )
                wrong[method] += errors
                wrong_days[method] += errors > 0
            same += sum(fixed[pair] == adaptive[pair] for pair in pairs)
            fixed_decided += sum(fixed[pair] is not None for pair in pairs)
            found += sum(
                fixed[pair] is not None and fixed[pair] == adaptive[pair] for pair in pairs
            )
            pair_count += len(pairs)
        compared += pair_count
        median, mean = statistics.median(shares), statistics.fmean(shares)
        agreement = same / pair_count
        recall = found / fixed_decided if fixed_decided else float("nan")
        limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / days)
        met = wrong_days["adaptive"] / days <= limit
        if scenario.differs and fixed_decided:
            met = met and recall >= 0.9 and median <= BUDGET_SHARE
        all_met &= met
        print(
            f"{scenario.name:<22} {pair_count:>5} {median:>12.0%} {mean:>5.0%} {agreement:>6.1%} "
            f"{f'{recall:.1%}' if scenario.differs and fixed_decided else '–':>9} "
            f"{wrong['fixed'] / pair_count:>10.1%}/{wrong['adaptive'] / pair_count:<10.1%} "
            f"{wrong_days['fixed'] / days:>9.1%}/{wrong_days['adaptive'] / days:<10.1%}  "
            f"{'pass' if met else 'FAIL'}"
        )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{compared} simulated comparisons in {time.perf_counter() - started:.0f} s; "
        f"load average {load}; targets {'met' if all_met else 'MISSED'}"
    )
    return all_met


def _pipeline_scenarios() -> dict[str, dict[str, dict[str, float]]]:
    """The two-model scenarios of the statistics section, as the scripted agents' chances:
    agent name → test `tNN` → the chance it answers right."""
    chosen = {"2 models, A better", "2 models, equal"}
    return {
        scenario.name: {
            model.removeprefix("http:"): {f"t{i:02d}": p for i, p in enumerate(chances)}
            for model, chances in scenario.probabilities.items()
        }
        for scenario in scenarios()
        if scenario.name in chosen
    }


def run_pipeline(days: int) -> bool:
    """Simulated days through the real pipeline (the Dagster stages in process, scripted
    agents over HTTP): an attempt budget of 40% of a fixed k = 10 against that k = 10, each
    in its own suite and store, answered by the same agents (the same attempt gets the same
    answer in both, so the two methods are compared on the same outcomes)."""
    from eval_pipeline.defs.evaluate import run_evaluation
    from eval_pipeline.pipeline import EvaluationRequest, evaluate
    from eval_pipeline.suite import AttemptBudget, load_suite
    from eval_pipeline_tests.pipeline.coin_agents import CoinAgents

    def dagster(suite, request, on_stage):
        return run_evaluation(suite, request, on_stage=on_stage)

    print(f"\n== through the pipeline: {days} simulated day(s) per scenario ==")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    ok = True
    for scenario, chances in _pipeline_scenarios().items():
        difference = len({tuple(c.values()) for c in chances.values()}) > 1
        better_truth = "http:a" if difference else None
        tests = len(next(iter(chances.values())))
        models = tuple(f"http:{name}" for name in chances)
        fixed_runs = 10 * tests * len(models)
        shares, same, wrong_adaptive, wrong_fixed, seconds = [], 0, 0, 0, []
        fixed_decided, found = 0, 0
        with tempfile.TemporaryDirectory() as folder, CoinAgents(chances) as agents:
            adaptive_suite = load_suite(agents.write_suite(Path(folder) / "adaptive"))
            fixed_suite = load_suite(agents.write_suite(Path(folder) / "fixed"))
            for day_index in range(days):
                agents.seed = day_index  # a new day: new draws
                day = date(2026, 11, 1) + timedelta(days=day_index)
                started = time.perf_counter()
                budget = AttemptBudget(runs=int(0.4 * fixed_runs))
                adaptive = evaluate(
                    adaptive_suite,
                    EvaluationRequest(models=models, run_date=day, budget=budget),
                    runner=dagster,
                ).document
                seconds.append(time.perf_counter() - started)
                fixed = evaluate(
                    fixed_suite,
                    EvaluationRequest(models=models, run_date=day, k=10),
                    runner=dagster,
                ).document
                (pair,) = adaptive.budget.decision.comparisons
                adaptive_says = pair.better
                (compared,) = fixed.comparisons
                fixed_says = compared.model_a if compared.significant else None
                shares.append(adaptive.budget.spent_runs / fixed_runs)
                same += adaptive_says == fixed_says
                fixed_decided += fixed_says is not None
                found += fixed_says is not None and adaptive_says == fixed_says
                wrong_adaptive += adaptive_says is not None and adaptive_says != better_truth
                wrong_fixed += fixed_says is not None and fixed_says != better_truth
        print(
            f"{scenario:>20}: runs {statistics.median(shares):.0%} of k=10 (median; mean "
            f"{statistics.mean(shares):.0%}), same decision {same}/{days}, k=10's decisions "
            f"found {found}/{fixed_decided}, wrong: adaptive "
            f"{wrong_adaptive}/{days}, k=10 {wrong_fixed}/{days}; an adaptive day took "
            f"{statistics.median(seconds):.1f} s (median)"
        )
        if difference:
            ok &= statistics.median(shares) <= 0.4 and found == fixed_decided
        ok &= wrong_adaptive == 0
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="simulated suites, statistics only (the default while no other part is asked)",
    )
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="simulated days through the real pipeline (Dagster stages, scripted HTTP agents)",
    )
    parser.add_argument(
        "--pipeline-days", type=int, default=2, help="simulated days per scenario, --pipeline"
    )
    parser.add_argument("--days", type=int, default=300, help="simulated days per scenario")
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args()
    # Sections: --statistics is this one; a pipeline part comes behind its own flag. With
    # no section asked for, the statistics run.
    sections = [options.statistics, options.pipeline]
    met = True
    if options.statistics or not any(sections):
        met &= statistics_section(options.days, options.seed)
        pass_rate_section(max(options.days // 3, 30), options.seed)
    if options.pipeline:
        met &= run_pipeline(options.pipeline_days)
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

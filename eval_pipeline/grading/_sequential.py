"""Adaptive attempts under a budget: anytime-valid comparisons between models, the decision, the next runs."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from eval_pipeline.grading._mixture import PRIOR, log_beta
from eval_pipeline.grading._pass_rate_sequence import (
    PassRateSequence,
    pass_rate_sequence,
    per_test_intervals,
)
from eval_pipeline.grading._statistics import AttemptsByTest

Question = Literal["compare", "pass_rate"]

RUNS_HORIZON = 10_000
"""Past this many further runs `runs_to_decide` says "no difference seen" instead of a number."""

EXPLORATION = 0.1
"""Weight of the posterior spread in `next_round`'s score, beside the gap of the means.

Enough to break ties among tests whose attempts all agreed so far (so a round spreads over
them, not onto the first), small enough that stable tests do not draw the budget: in
benchmarks/adaptive_budget.py weights 0, 0.1 and 0.3 reach the same decisions at a median
20–40% of fixed k = 10's runs, and 1 misses the 40% budget on a fifth of the pairs.
"""


@dataclass(frozen=True)
class BudgetQuestion:
    """What the budget is spent to answer, and how sure the answer must be.

    `compare`: which model is better, for every pair of models. `pass_rate`: each model's
    suite pass rate within `width`. `alpha` is the family-wise error of all decisions
    together, held at every look (anytime-valid).
    """

    kind: Question
    alpha: float = 0.05
    width: float = 0.2

    def __post_init__(self) -> None:
        if self.kind not in ("compare", "pass_rate"):
            raise ValueError(f"a budget question is 'compare' or 'pass_rate', got {self.kind!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be between 0 and 1, got {self.alpha}")
        if not 0.0 < self.width <= 1.0:
            raise ValueError(f"width must be in (0, 1], got {self.width}")


def default_question(models: int) -> Question:
    """`compare` with two or more models, `pass_rate` with one."""
    return "compare" if models >= 2 else "pass_rate"


@dataclass(frozen=True)
class SequentialComparison:
    """Models A and B on their paired attempts, as evidence that accumulates run by run.

    `a_wins`/`b_wins`: discordant paired attempts (exactly one passed) won by A / by B.
    `e_value`: the test martingale against "no difference". `alpha`: this pair's level after
    the split across pairs; `family_alpha`: the level the user asked for (the same as
    `alpha` for a lone pair). `better`: the model decided better, None while undecided.
    `runs_to_decide`: rough further runs (both models) that would decide it at the rate seen
    so far; None when decided or when no difference shows.
    """

    model_a: str
    model_b: str
    a_wins: int
    b_wins: int
    e_value: float
    alpha: float
    better: str | None
    runs_to_decide: int | None
    family_alpha: float | None = None

    def sentence(self, *, spent: int) -> str:
        """One line for the report, e.g. "http:a is better than http:b (anytime-valid, α = 0.05)".

        Args:
            spent: runs spent so far, said when the pair is still undecided.
        """
        alpha = self.alpha if self.family_alpha is None else self.family_alpha
        if self.better is not None:
            worse = self.model_b if self.better == self.model_a else self.model_a
            return f"{self.better} is better than {worse} (anytime-valid, α = {alpha:g})"
        head = f"{self.model_a} vs {self.model_b}: undecided after {spent} runs"
        if self.runs_to_decide is None:
            return f"{head}; no difference seen so far"
        return f"{head}; about {_about(self.runs_to_decide)} more would decide it"


@dataclass(frozen=True)
class Allocation:
    """One (model, test) to run further this round: up to `attempts` attempts in all, and why."""

    model: str
    test: str
    attempts: int
    reason: str


@dataclass(frozen=True)
class BudgetDecision:
    """Where the question stands after the runs so far.

    `comparisons`: every pair of models in the order given (compare), () for pass_rate.
    `pass_rates`: every model (at the family alpha for compare, informational; split
    across models for pass_rate). `decided`: compare, every pair decided; pass_rate, every
    model's interval within the question's width.
    """

    question: BudgetQuestion
    comparisons: tuple[SequentialComparison, ...]
    pass_rates: tuple[PassRateSequence, ...]
    decided: bool


def _about(runs: int) -> int:
    # Two significant figures: the estimate is rough, a precise-looking number would mislead.
    if runs < 20:
        return runs
    scale = 10 ** (len(str(runs)) - 2)
    return round(runs / scale) * scale


def _log_e_value(wins: float, discordant: float) -> float:
    # Beta-binomial mixture likelihood ratio against p = ½; symmetric in wins ↔ losses.
    return (
        log_beta(wins + PRIOR, discordant - wins + PRIOR)
        - log_beta(PRIOR, PRIOR)
        + discordant * math.log(2.0)
    )


def _paired_counts(a: AttemptsByTest, b: AttemptsByTest) -> tuple[int, int, int]:
    a_wins = b_wins = paired = 0
    for name in a.keys() & b.keys():
        pairs = list(zip(map(bool, a[name]), map(bool, b[name]), strict=False))
        paired += len(pairs)
        a_wins += pairs.count((True, False))
        b_wins += pairs.count((False, True))
    return a_wins, b_wins, paired


def _runs_to_decide(a_wins: int, b_wins: int, paired: int, threshold: float) -> int | None:
    discordant = a_wins + b_wins
    if discordant == 0 or paired == 0:
        return None
    leader = max(a_wins, b_wins)
    # Laplace's rule: the win share shrunk toward ½, so a short lucky streak does not promise
    # a decision in a handful of runs.
    share = (leader + 1) / (discordant + 2)
    rate = discordant / paired
    limit = RUNS_HORIZON / 2 * rate  # discordant pairs reachable within the horizon's runs

    def crosses(more: int) -> bool:
        return _log_e_value(leader + share * more, discordant + more) >= math.log(threshold)

    more, low = 1, 0
    while not crosses(more):
        if more > limit:
            return None
        low, more = more, more * 2
    while more - low > 1:
        middle = (low + more) // 2
        low, more = (low, middle) if crosses(middle) else (middle, more)
    runs = 2 * math.ceil(more / rate)
    return runs if runs <= RUNS_HORIZON else None


def sequential_comparison(
    a: AttemptsByTest,
    b: AttemptsByTest,
    *,
    model_a: str,
    model_b: str,
    alpha: float,
    family_alpha: float | None = None,
) -> SequentialComparison:
    """Anytime-valid paired test of two models: decide which is better whenever E ≥ 1/α.

    Attempt i of A is paired with attempt i of B on the same test (i below both attempt
    counts); a pair is discordant when exactly one passed. Under the sharp null "on every
    test, A and B pass with the same probability" each discordant pair is A's win with
    probability exactly ½, whatever test it came from, so A's wins among the discordant pairs
    form a fair-coin sequence even when the tests were chosen from the outcomes so far —
    provided both attempts of a pair were chosen before either was seen, as `next_round`
    does. The test martingale is the beta-binomial mixture likelihood ratio against ½
    (Robbins 1970, "Statistical methods related to the law of the iterated logarithm"),
    E = B(s + a, n − s + a) / B(a, a) · 2ⁿ with s of n discordant pairs won by A and the
    Beta(a, a) prior of `PRIOR`; by Ville's inequality (Ville 1939) P(E ever ≥ 1/α) ≤ α, so
    the user may look after every round and stop when it is decided. Like the exact McNemar
    and sign-flip tests of `compare_models`, it tests the sharp null: a decision says the
    two models do not pass every test equally often, and names the one that won more
    discordant pairs. At a fixed n it is more conservative than the exact binomial test (the
    price of looking at every round).

    Args:
        a: model A's attempts per test, in attempt order.
        b: model B's attempts per test, in attempt order.
        model_a: A's model id, carried into the result.
        model_b: B's model id, carried into the result.
        alpha: the level of this pair (already split across pairs by the caller).
        family_alpha: the level the user asked for, said in the sentence; defaults to alpha.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    return _compared(
        model_a, model_b, _paired_counts(a, b), alpha, family_alpha=family_alpha, estimate=True
    )


def _compared(
    model_a: str,
    model_b: str,
    counts: tuple[int, int, int],
    alpha: float,
    *,
    family_alpha: float | None,
    estimate: bool,
) -> SequentialComparison:
    a_wins, b_wins, paired = counts
    log_e = _log_e_value(a_wins, a_wins + b_wins)
    better = None
    if log_e >= math.log(1.0 / alpha) and a_wins != b_wins:
        better = model_a if a_wins > b_wins else model_b
    more = None
    if better is None and estimate:
        more = _runs_to_decide(a_wins, b_wins, paired, 1.0 / alpha)
    e_value = math.exp(min(log_e, 700.0))  # past e⁷⁰⁰ a float overflows; long decided anyway
    return SequentialComparison(
        model_a, model_b, a_wins, b_wins, e_value, alpha, better, more, family_alpha
    )


def _holm_comparisons(
    attempts: Mapping[str, AttemptsByTest],
    pairs: list[tuple[str, str]],
    alpha: float,
    *,
    estimate: bool,
) -> tuple[SequentialComparison, ...]:
    counts = [_paired_counts(attempts[x], attempts[y]) for x, y in pairs]

    def compared(index: int, level: float) -> SequentialComparison:
        x, y = pairs[index]
        return _compared(x, y, counts[index], level, family_alpha=alpha, estimate=estimate)

    m = len(pairs)
    evidence = [_log_e_value(a_wins, a_wins + b_wins) for a_wins, b_wins, _ in counts]
    order = sorted(range(m), key=lambda i: -evidence[i])
    done: dict[int, SequentialComparison] = {}
    for rank, index in enumerate(order):
        at_level = compared(index, alpha / (m - rank))
        if at_level.better is None:
            break
        done[index] = at_level
    remaining = alpha / max(m - len(done), 1)
    return tuple(done[i] if i in done else compared(i, remaining) for i in range(m))


def decide(attempts: Mapping[str, AttemptsByTest], question: BudgetQuestion) -> BudgetDecision:
    """Where the question stands: every pair's comparison (compare) and every model's interval.

    compare: Holm's step-down over the m pairs (Holm 1979) on the anytime-valid p-values
    1/E: the pairs in decreasing E, the j-th (from 0) is decided at α/(m − j) while every one
    before it was. Holm is valid here though the looks are many: for each pair,
    p* = 1/supₜ Eₜ (the smallest 1/E it will ever show) is a valid p-value by Ville's
    inequality, Holm controls the family-wise error on any valid p-values whatever their
    dependence, and Holm is monotone (smaller p-values never decide fewer pairs), so every
    decision at every look is one Holm would make on the p*, and the chance of any wrong
    decision at any look stays ≤ α. Bonferroni (α/m for every pair) is the special case
    where no pair has been decided yet; Holm gives the pairs left α/(m − k) once k are.
    pass_rate: α is split over the models (union bound); with compare each model's
    interval is at α, informational.

    Args:
        attempts: model → test → passed per attempt, e.g. from `attempts_by_model`; the
            models' order is the mapping's.
        question: what is asked, and at which α (and width).
    """
    return _decide(attempts, question, report=True)


def _decide(
    attempts: Mapping[str, AttemptsByTest], question: BudgetQuestion, *, report: bool
) -> BudgetDecision:
    # next_round needs only the decisions: the intervals and run estimates cost most of the time.
    models = list(attempts)
    pairs = list(itertools.combinations(models, 2))
    comparisons: tuple[SequentialComparison, ...] = ()
    if question.kind == "compare":
        comparisons = _holm_comparisons(attempts, pairs, question.alpha, estimate=report)
        rate_alpha = question.alpha
    else:
        rate_alpha = question.alpha / max(len(models), 1)
    rates = tuple(
        pass_rate_sequence(attempts[model], model=model, alpha=rate_alpha)
        for model in models
        if attempts[model] and (report or question.kind == "pass_rate")
    )
    if question.kind == "compare":
        decided = all(c.better is not None for c in comparisons)
    else:
        decided = all(rate.width <= question.width for rate in rates)
    return BudgetDecision(question, comparisons, rates, decided)


def _test_order(attempts: Mapping[str, AttemptsByTest], models: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(name for model in models for name in attempts[model]))


def _posterior(tries: Sequence[bool]) -> tuple[float, float]:
    # Mean and variance of Beta(1 + passes, 1 + fails), the test's pass probability.
    a, b = 1 + sum(map(bool, tries)), 1 + len(tries) - sum(map(bool, tries))
    return a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))


def _disagreement(attempts: Mapping[str, AttemptsByTest], model: str, other: str, test: str) -> str:
    def passed(name: str) -> str:
        tries = attempts[name].get(test, ())
        return f"{sum(map(bool, tries))} of {len(tries)}"

    return f"disagrees with {other} (passed {passed(model)} vs {passed(other)})"


def _compare_round(
    attempts: Mapping[str, AttemptsByTest], decision: BudgetDecision, runs: int
) -> list[Allocation]:
    undecided = [(c.model_a, c.model_b) for c in decision.comparisons if c.better is None]
    # Every model still in an undecided pair gets the chosen test's next attempt in the same
    # round: both halves of every new pair are chosen before either is seen, which keeps each
    # discordant pair a fair coin under the null. Topping up one model alone would pair its
    # new attempt with one already seen, chosen because of what it showed.
    playing = [m for m in attempts if any(m in pair for pair in undecided)]
    tests = _test_order(attempts, playing)
    planned = {(m, t): len(attempts[m].get(t, ())) for m in playing for t in tests}
    posterior = {(m, t): _posterior(attempts[m].get(t, ())) for m in playing for t in tests}

    scores, partners = [], []
    for test in tests:
        best: dict[str, tuple[float, str]] = {}
        total = 0.0
        for x, y in undecided:
            (mean_x, var_x), (mean_y, var_y) = posterior[x, test], posterior[y, test]
            # How far apart the two models' pass probabilities are on this test: the gap of
            # the posterior means is the drift of A's wins minus B's per paired attempt
            # (P(A wins) − P(B wins) = p_A − p_B). Not P(discordant): a flaky test both pass
            # half the time is discordant half the time, but as coin flips that only dilute
            # the evidence; scored by P(discordant) the benchmark's rounds went there and
            # missed the 40% budget.
            gap = abs(mean_x - mean_y) + EXPLORATION * math.sqrt(var_x + var_y)
            total += gap
            for model, other in ((x, y), (y, x)):
                if gap > best.get(model, (-1.0, ""))[0]:
                    best[model] = (gap, other)
        scores.append(total)
        partners.append(best)

    # A missing attempt first, whatever its outcomes would say: round 1 left unfinished.
    missing = [(m, t) for m in playing for t in tests if not planned[m, t]][:runs]
    allocations = [Allocation(m, t, 1, "no attempt yet") for m, t in missing]
    planned.update(dict.fromkeys(missing, 1))
    left = runs - len(missing)
    # Several attempts of a round may go to one test: the j-th is worth its score / j
    # (D'Hondt's divisors), so a round leans on the tests that differ without betting it all
    # on one whose outcomes it has not seen yet.
    # A test that does not fit the runs left never will (its cost stays, the runs shrink),
    # so it leaves the heap; a chosen one goes back at its next divisor.
    heap = [(-score, 0, index) for index, score in enumerate(scores)]
    heapq.heapify(heap)
    chosen: dict[tuple[str, str], tuple[int, str]] = {}
    while heap and left >= len(playing):  # a test costs at least one run per model in play
        _, given, index = heapq.heappop(heap)
        test = tests[index]
        target = max(planned[m, test] for m in playing) + 1
        cost = sum(target - planned[m, test] for m in playing)
        if cost > left:
            continue
        for model in playing:
            if target > planned[model, test]:
                planned[model, test] = target
                chosen.setdefault((model, test), (len(chosen), partners[index][model][1]))
        left -= cost
        heapq.heappush(heap, (-scores[index] / (given + 2), given + 1, index))
    for (model, test), (_, other) in sorted(chosen.items(), key=lambda item: item[1][0]):
        reason = _disagreement(attempts, model, other, test)
        allocations.append(Allocation(model, test, planned[model, test], reason))
    return _merge(allocations)


def _pass_rate_round(
    attempts: Mapping[str, AttemptsByTest], decision: BudgetDecision, width: float, runs: int
) -> list[Allocation]:
    open_models = [rate.model for rate in decision.pass_rates if rate.width > width]
    alpha = decision.pass_rates[0].alpha if decision.pass_rates else decision.question.alpha
    candidates = []
    for model_index, model in enumerate(open_models):
        names, low, high = per_test_intervals(attempts[model], alpha)
        for test_index, name in enumerate(names):
            empty = not attempts[model][name]
            reason = (
                "no attempt yet"
                if empty
                else f"widest interval ({low[test_index]:.2f}–{high[test_index]:.2f})"
            )
            key = (not empty, -(high[test_index] - low[test_index]), model_index, test_index)
            candidates.append((key, model, name, reason))
    candidates.sort(key=lambda row: row[0])
    allocations = []
    planned = {(model, name): len(attempts[model][name]) for _, model, name, _ in candidates}
    while candidates and len(allocations) < runs:
        for _, model, name, reason in candidates[: runs - len(allocations)]:
            planned[model, name] += 1
            allocations.append(Allocation(model, name, planned[model, name], reason))
    return _merge(allocations)


def _merge(allocations: list[Allocation]) -> list[Allocation]:
    # One row per (model, test), at its highest target, in the order it was first chosen.
    merged: dict[tuple[str, str], Allocation] = {}
    for allocation in allocations:
        key = (allocation.model, allocation.test)
        first = merged.get(key, allocation)
        merged[key] = Allocation(
            allocation.model, allocation.test, allocation.attempts, first.reason
        )
    return list(merged.values())


def next_round(
    attempts: Mapping[str, AttemptsByTest], question: BudgetQuestion, *, runs: int
) -> list[Allocation]:
    """The next round's runs: where another attempt most changes the answer, at most `runs`.

    compare: each test is scored by how far apart the models in undecided pairs may be on
    it, |mean_A − mean_B| + `EXPLORATION` · √(var_A + var_B) of the posteriors
    Beta(1 + passes, 1 + fails) per (model, test), summed over the undecided pairs; the gap
    of the means is the expected drift of A's wins minus B's per paired attempt. The round
    goes to the best tests, the j-th attempt of a test within the round worth its score / j
    (D'Hondt), and each chosen test gets one more attempt of every model still in an
    undecided pair, all brought to the same count (a test costs one run per such model).
    pass_rate: one more attempt to the (model, test) whose per-test interval is widest, among
    the models not yet within the width, round after round of the ranking while runs are
    left. A (model, test) with no attempt gets one first. Deterministic: ties go by model
    then test order, so a rerun with the same budget picks the same runs.

    Args:
        attempts: model → test → passed per attempt (round 1, every test once per model, is
            the caller's); the models' order is the mapping's.
        question: what is asked.
        runs: new runs this round may use at most.

    Returns:
        Allocations, most informative first; each asks for `attempts` − current new runs.
        [] once the question is decided, or (compare) when `runs` is fewer than one
        attempt of each model still in play.
    """
    if runs < 0:
        raise ValueError(f"runs must be ≥ 0, got {runs}")
    decision = _decide(attempts, question, report=False)
    if decision.decided or runs == 0:
        return []
    if question.kind == "compare":
        return _compare_round(attempts, decision, runs)
    return _pass_rate_round(attempts, decision, question.width, runs)

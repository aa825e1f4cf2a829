"""Adaptive attempts under a budget: anytime-valid comparisons, pass-rate sequences, next runs."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from eval_pipeline.grading import (
    Allocation,
    BudgetQuestion,
    PassRateSequence,
    SequentialComparison,
    decide,
    next_round,
    pass_rate_sequence,
    sequential_comparison,
)

COMPARE = BudgetQuestion("compare")


def scipy_special():
    """scipy is a dev extra for cross-checks only."""
    return pytest.importorskip("scipy.special")


def scipy_stats():
    return pytest.importorskip("scipy.stats")


def margin(alpha: float, n: int) -> float:
    """Three binomial standard errors of a simulated rate of α over n trials."""
    return 3 * math.sqrt(alpha * (1 - alpha) / n)


def run(allocations: list[Allocation], attempts, probabilities, rng) -> int:
    """Carries out a round: each allocation's missing attempts, drawn from the true
    probabilities (model → test → p). Returns the runs spent."""
    spent = 0
    for allocation in allocations:
        tries = attempts[allocation.model][allocation.test]
        p = probabilities[allocation.model][allocation.test]
        while len(tries) < allocation.attempts:
            tries.append(bool(rng.random() < p))
            spent += 1
    return spent


def first_round(probabilities, rng):
    return {
        model: {test: [bool(rng.random() < p)] for test, p in tests.items()}
        for model, tests in probabilities.items()
    }


# --- comparisons ----------------------------------------------------------------------------


def wins(a_wins: int, b_wins: int, ties: int = 0) -> tuple[dict, dict]:
    """Attempts of A and B on one test with the given discordant and concordant pairs."""
    a = [True] * a_wins + [False] * b_wins + [True] * ties
    b = [False] * a_wins + [True] * b_wins + [True] * ties
    return {"t": a}, {"t": b}


@pytest.mark.parametrize(("s", "n"), [(0, 0), (3, 3), (7, 10), (5, 10), (0, 12), (40, 60)])
def test_e_value_is_the_beta_binomial_mixture_against_a_fair_coin(s: int, n: int) -> None:
    betaln = scipy_special().betaln
    a, b = wins(s, n - s, ties=2)
    compared = sequential_comparison(a, b, model_a="http:a", model_b="http:b", alpha=0.05)
    expected = math.exp(betaln(s + 0.5, n - s + 0.5) - betaln(0.5, 0.5) + n * math.log(2))
    assert compared.e_value == pytest.approx(expected, rel=1e-9)
    assert (compared.a_wins, compared.b_wins) == (s, n - s)


def test_a_decision_is_never_reached_where_the_exact_binomial_test_does_not_reject() -> None:
    binomtest = scipy_stats().binomtest
    decisions = 0
    for alpha in (0.05, 0.01):
        for n in range(1, 41):
            for s in range(n + 1):
                a, b = wins(s, n - s)
                compared = sequential_comparison(a, b, model_a="a", model_b="b", alpha=alpha)
                if compared.better is not None:
                    decisions += 1
                    assert binomtest(s, n).pvalue <= alpha, (alpha, s, n)
    assert decisions > 300  # the check above was exercised


def test_the_model_that_wins_the_discordant_pairs_is_decided_better() -> None:
    a, b = wins(1, 12)
    compared = sequential_comparison(a, b, model_a="http:a", model_b="http:b", alpha=0.05)
    assert compared.better == "http:b"
    assert compared.runs_to_decide is None
    assert compared.sentence(spent=200) == (
        "http:b is better than http:a (anytime-valid, α = 0.05)"
    )


def test_undecided_sentences_say_how_far_a_decision_is() -> None:
    a, b = wins(4, 0)
    close = sequential_comparison(a, b, model_a="http:a", model_b="http:b", alpha=0.05)
    assert close.better is None and close.runs_to_decide is not None
    assert close.sentence(spent=200) == (
        f"http:a vs http:b: undecided after 200 runs; about {close.runs_to_decide} more"
        " would decide it"
    )
    a, b = wins(5, 5)
    even = sequential_comparison(a, b, model_a="http:a", model_b="http:b", alpha=0.05)
    assert even.runs_to_decide is None
    assert even.sentence(spent=200) == (
        "http:a vs http:b: undecided after 200 runs; no difference seen so far"
    )


def paired(pairs: list[tuple[bool, bool]]) -> tuple[dict, dict]:
    return {"t": [x for x, _ in pairs]}, {"t": [y for _, y in pairs]}


def test_runs_to_decide_is_about_right_when_the_rate_holds() -> None:
    win, loss, tie = (True, False), (False, True), (False, False)
    start = [win, tie, win, tie]  # half the paired attempts discordant, all won by A
    more = sequential_comparison(*paired(start), model_a="a", model_b="b", alpha=0.05)
    assert more.runs_to_decide is not None
    # Going on at that rate, with the share shrunk toward ½ the estimate assumes (¾):
    unit = [win, win, win, loss] + [tie] * 4

    def after(runs: int) -> SequentialComparison:
        extra = (unit * runs)[: runs // 2]  # a paired attempt is two runs
        return sequential_comparison(*paired(start + extra), model_a="a", model_b="b", alpha=0.05)

    assert after(more.runs_to_decide + 8).better == "a"
    assert after(more.runs_to_decide // 3).better is None


def test_the_sentence_states_the_family_alpha_not_the_split_one() -> None:
    perfect = {"t": [True] * 30}
    never = {"t": [False] * 30}
    decision = decide({"http:a": perfect, "http:b": never, "http:c": never}, COMPARE)
    first = decision.comparisons[0]
    assert first.alpha < 0.05
    assert first.sentence(spent=90) == "http:a is better than http:b (anytime-valid, α = 0.05)"


def test_pairs_are_decided_with_holm_levels_in_the_models_order() -> None:
    # a–b: 9 of 9 discordant pairs to a, E ≈ 95, past 3/α = 60; b–c: 8 of 8 to b, E ≈ 50,
    # past 2/α = 40 once a–b is decided (Bonferroni's 60 would leave it open); a–c: nothing.
    day = {
        "a": {"t": [True] * 9},
        "b": {"t": [False] * 9, "u": [True] * 8},
        "c": {"u": [False] * 8},
    }
    decision = decide(day, COMPARE)
    pairs = [(c.model_a, c.model_b) for c in decision.comparisons]
    assert pairs == [("a", "b"), ("a", "c"), ("b", "c")]
    ab, ac, bc = decision.comparisons
    assert ab.better == "a" and ab.alpha == pytest.approx(0.05 / 3)
    assert bc.better == "b" and bc.alpha == pytest.approx(0.05 / 2)
    assert 40 <= bc.e_value < 60
    assert ac.better is None and ac.alpha == pytest.approx(0.05)
    assert not decision.decided


# --- the point of it all: looking after every round -----------------------------------------


NULL_PROBABILITIES = (0.5, 0.5, 0.5, 0.4, 0.6, 0.3, 1.0, 0.0)


def discordant_pairs(a: dict, b: dict) -> tuple[int, int]:
    """A's wins and all discordant pairs, attempt i of A against attempt i of B."""
    pairs = [(x, y) for test in a for x, y in zip(a[test], b[test], strict=False) if x != y]
    return sum(x for x, _ in pairs), len(pairs)


@functools.cache
def naive_rejects(s: int, n: int, alpha: float) -> bool:
    return n > 0 and scipy_stats().binomtest(s, n).pvalue <= alpha


def test_looking_after_every_round_keeps_wrong_decisions_below_alpha() -> None:
    """Under the null (equal probabilities on every test), tests chosen by next_round, the
    loop stopping at the first decided round: a decision is wrong, and happens ≤ α of the
    time; a fixed-sample exact binomial test looked at after every round does not hold α."""
    scipy_stats()
    rng = np.random.default_rng(20261201)
    alpha, simulations, rounds = 0.05, 2_000, 12
    truth = {model: {f"t{i}": p for i, p in enumerate(NULL_PROBABILITIES)} for model in ("a", "b")}
    sequential_wrong = naive_wrong = 0
    for _ in range(simulations):
        attempts = first_round(truth, rng)
        naive_decided = False
        for _ in range(rounds):
            a_wins, discordant = discordant_pairs(attempts["a"], attempts["b"])
            naive_decided |= naive_rejects(a_wins, discordant, alpha)
            allocations = next_round(attempts, COMPARE, runs=8)
            if not allocations:
                break
            run(allocations, attempts, truth, rng)
        sequential_wrong += next_round(attempts, COMPARE, runs=8) == []  # [] once decided
        naive_wrong += naive_decided
    assert sequential_wrong / simulations <= alpha + margin(alpha, simulations)
    assert naive_wrong / simulations > alpha + margin(alpha, simulations)


# --- pass-rate sequences --------------------------------------------------------------------


def test_the_pass_rate_interval_covers_the_true_mean_at_every_look() -> None:
    rng = np.random.default_rng(7)
    alpha, simulations, rounds = 0.2, 300, 12
    probabilities = (0.5, 0.9, 0.1, 0.7, 1.0, 0.0, 0.97, 0.3)
    truth = {"m": {f"t{i}": p for i, p in enumerate(probabilities)}}
    mean = float(np.mean(probabilities))
    question = BudgetQuestion("pass_rate", alpha=alpha, width=0.05)
    missed = 0
    for _ in range(simulations):
        attempts = first_round(truth, rng)
        for _ in range(rounds):
            rate = decide(attempts, question).pass_rates[0]
            if not rate.low <= mean <= rate.high:
                missed += 1
                break
            run(next_round(attempts, question, runs=4), attempts, truth, rng)
    assert missed / simulations <= alpha + margin(alpha, simulations)


def test_a_suite_of_stable_tests_narrows_with_attempts() -> None:
    widths = [
        pass_rate_sequence({f"t{i}": [True] * n for i in range(20)}, model="m", alpha=0.05).width
        for n in (1, 5, 20, 100)
    ]
    assert widths == sorted(widths, reverse=True)
    assert widths[0] > 0.5 and widths[-1] < 0.05


def test_one_alpha_is_shared_across_the_tests_of_a_suite() -> None:
    # 40 tests that passed 8 of 8: a union bound of per-test sequences at α/40 would put the
    # low near 0.35; the shared construction keeps it above 0.8.
    rate = pass_rate_sequence({f"t{i}": [True] * 8 for i in range(40)}, model="m", alpha=0.05)
    assert rate.low > 0.8 and rate.high == 1.0


def test_a_pass_rate_interval_holds_the_observed_rate() -> None:
    attempts = {"t1": [True, True, False, True], "t2": [False, False], "t3": [True]}
    rate = pass_rate_sequence(attempts, model="vllm:a", alpha=0.05)
    observed = np.mean([3 / 4, 0.0, 1.0])
    assert isinstance(rate, PassRateSequence)
    assert rate.low <= observed <= rate.high
    assert rate.attempts == 7 and rate.width == pytest.approx(rate.high - rate.low)


def test_pass_rate_question_is_decided_once_every_model_is_within_the_width() -> None:
    question = BudgetQuestion("pass_rate", width=0.2)
    narrow = {f"t{i}": [True] * 80 for i in range(5)}
    wide = {f"t{i}": [True] * 2 for i in range(5)}
    assert decide({"a": narrow}, question).decided
    decision = decide({"a": narrow, "b": wide}, question)
    assert not decision.decided and decision.comparisons == ()
    assert [rate.model for rate in decision.pass_rates] == ["a", "b"]
    allocations = next_round({"a": narrow, "b": wide}, question, runs=3)
    assert {allocation.model for allocation in allocations} == {"b"}
    assert allocations[0].reason.startswith("widest interval (")


# --- next_round -----------------------------------------------------------------------------


def disagreeing_day() -> dict[str, dict[str, list[bool]]]:
    return {
        "vllm:a": {"always": [True, True], "splits": [True, True], "flaky": [True, False]},
        "vllm:b": {"always": [True, True], "splits": [False, False], "flaky": [False, True]},
    }


def test_next_round_prefers_the_test_where_the_models_disagree() -> None:
    allocations = next_round(disagreeing_day(), COMPARE, runs=2)
    assert [(a.model, a.test, a.attempts) for a in allocations] == [
        ("vllm:a", "splits", 3),
        ("vllm:b", "splits", 3),
    ]
    assert allocations[0].reason == "disagrees with vllm:b (passed 2 of 2 vs 0 of 2)"


def test_a_round_leans_on_the_disagreeing_test_and_spreads_once_it_has_plenty() -> None:
    small = next_round(disagreeing_day(), COMPARE, runs=8)
    assert {a.test for a in small} == {"splits"}
    # With runs enough, the j-th attempt on "splits" is worth less than a first elsewhere.
    large = next_round(disagreeing_day(), COMPARE, runs=40)
    attempts = {a.test: a.attempts for a in large if a.model == "vllm:a"}
    assert "flaky" in attempts
    assert attempts["splits"] - 2 >= 5 * (attempts["flaky"] - 2)


def test_next_round_never_exceeds_its_runs_and_is_deterministic() -> None:
    day = disagreeing_day()
    day["vllm:c"] = {"always": [True], "splits": [True], "flaky": [False]}
    for runs in range(0, 12):
        allocations = next_round(day, COMPARE, runs=runs)
        new = sum(a.attempts - len(day[a.model][a.test]) for a in allocations)
        assert new <= runs
        assert all(a.attempts > len(day[a.model][a.test]) for a in allocations)
        assert allocations == next_round(day, COMPARE, runs=runs)


def test_next_round_gives_a_missing_attempt_first() -> None:
    day = {"a": {"t1": [True], "t2": []}, "b": {"t1": [False], "t2": [True]}}
    allocations = next_round(day, COMPARE, runs=1)
    assert [(a.model, a.test, a.attempts, a.reason) for a in allocations] == [
        ("a", "t2", 1, "no attempt yet")
    ]


def test_next_round_is_empty_once_decided() -> None:
    a, b = wins(12, 0)
    assert decide({"a": a, "b": b}, COMPARE).decided
    assert next_round({"a": a, "b": b}, COMPARE, runs=10) == []

"""Intervals on pass rates, paired tests between models, Holm, detectable difference, judge noise."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.grading import (
    GradeStatus,
    PairedComparison,
    RunOutcome,
    attempts_by_model,
    compare_models,
    day_comparisons,
    detectable_difference_sentence,
    holm_adjust,
    judge_self_agreement,
    mcnemar_exact_p,
    minimum_detectable_difference,
    pass_rate_interval,
    sign_flip_p,
    wilson_interval,
)

PROPERTY = settings(max_examples=150, deadline=None)


def scipy_stats():
    """scipy is a dev extra for cross-checks only; the hand-computed tests run without it."""
    return pytest.importorskip("scipy.stats")


# --- intervals ------------------------------------------------------------------------------


def test_wilson_interval_by_hand():
    # 7 of 10: centre (0.7 + z²/20)/(1 + z²/10), half-width z/(1 + z²/10)·√(0.021 + z²/400)
    low, high = wilson_interval(7, 10)
    assert (low, high) == pytest.approx((0.3968, 0.8922), abs=1e-4)
    # every run passed: the interval keeps a width below 100%
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0


def test_one_attempt_per_test_is_wilson():
    attempts = [[True]] * 31 + [[False]] * 12
    assert pass_rate_interval(attempts) == wilson_interval(31, 43)


def test_wilson_matches_statsmodels_on_random_counts():
    proportion_confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    rng = random.Random(18)
    for _ in range(500):
        n = rng.randint(1, 400)
        passes = rng.randint(0, n)
        expected = proportion_confint(passes, n, alpha=0.05, method="wilson")
        assert wilson_interval(passes, n) == pytest.approx(expected, abs=1e-12)


def test_attempts_of_one_test_count_as_a_cluster():
    # 10 tests × 3 attempts, each test all-pass or all-fail: 30 attempts carry the information
    # of 10, so the interval is Wilson on 10 tests, far wider than Wilson on 30 runs.
    attempts = [[True] * 3] * 6 + [[False] * 3] * 4
    assert pass_rate_interval(attempts) == pytest.approx(wilson_interval(6, 10))
    naive = wilson_interval(18, 30)
    clustered = pass_rate_interval(attempts)
    assert clustered[1] - clustered[0] > (naive[1] - naive[0]) * 1.5


def test_clustered_interval_uses_the_standard_error_of_mean_pass_at_1():
    attempts = [[True, True, False], [True, False, False], [True, True, True], [False] * 3]
    pass_at_1 = np.array([2 / 3, 1 / 3, 1.0, 0.0])
    p = pass_at_1.mean()
    se2 = pass_at_1.var(ddof=1) / len(pass_at_1)
    n_effective = min(max(p * (1 - p) / se2, 4), 12)
    z = 1.959963984540054
    centre = (p + z * z / (2 * n_effective)) / (1 + z * z / n_effective)
    half = (
        z
        / (1 + z * z / n_effective)
        * math.sqrt(p * (1 - p) / n_effective + z * z / (4 * n_effective**2))
    )
    assert pass_rate_interval(attempts) == pytest.approx((centre - half, centre + half))


def test_every_attempt_passing_keeps_a_width():
    low, high = pass_rate_interval([[True] * 5] * 8)
    assert high == 1.0 and low == pytest.approx(wilson_interval(8, 8)[0])


def test_interval_needs_tests_with_attempts():
    with pytest.raises(ValueError, match="at least one test"):
        pass_rate_interval([])
    with pytest.raises(ValueError, match="at least one test"):
        pass_rate_interval([[True], []])


attempt_lists = st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=60)


@PROPERTY
@given(attempt_lists)
def test_interval_contains_the_pass_rate_and_stays_in_0_1(attempts):
    low, high = pass_rate_interval(attempts)
    rate = sum(map(sum, attempts)) / sum(map(len, attempts))
    assert 0.0 <= low <= rate <= high <= 1.0


# --- McNemar and the sign-flip test ---------------------------------------------------------


def test_mcnemar_by_hand():
    # 1 vs 9 discordant: 2·(C(10,0) + C(10,1))/2¹⁰ = 22/1024
    assert mcnemar_exact_p(1, 9) == 22 / 1024
    assert mcnemar_exact_p(9, 1) == 22 / 1024
    assert mcnemar_exact_p(0, 3) == 0.25
    assert mcnemar_exact_p(4, 4) == 1.0
    assert mcnemar_exact_p(0, 0) == 1.0


def test_mcnemar_matches_scipy_binomtest_on_random_tables():
    rng = random.Random(1987)
    for _ in range(1000):
        a_only, b_only = rng.randint(0, 120), rng.randint(0, 120)
        if a_only + b_only == 0:
            continue
        expected = scipy_stats().binomtest(a_only, a_only + b_only, 0.5).pvalue
        assert mcnemar_exact_p(a_only, b_only) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_mcnemar_stays_exact_for_large_tables():
    p = mcnemar_exact_p(600, 400)
    assert p == pytest.approx(scipy_stats().binomtest(600, 1000, 0.5).pvalue, rel=1e-9)


def test_sign_flip_by_hand():
    # differences 2/3 and 1/3 (in thirds: 2, 1): sums ±3, ±1, half of them reach |3|
    assert sign_flip_p([2, 1]) == 0.5
    assert sign_flip_p([0, 0]) == 1.0
    # ±1 differences are McNemar: three wins for A and none for B
    assert sign_flip_p([1, 1, 1]) == 0.25
    assert sign_flip_p(np.array([2, 1])) == 0.5  # numpy integers are exact too


def brute_force_sign_flip(differences):
    observed = abs(sum(differences))
    sums = [
        abs(sum(s * d for s, d in zip(signs, differences, strict=True)))
        for signs in itertools.product((-1, 1), repeat=len(differences))
    ]
    return sum(s >= observed for s in sums) / len(sums)


def test_exact_sign_flip_matches_enumerating_every_sign_vector():
    rng = random.Random(2176)
    for _ in range(200):
        differences = [rng.randint(-3, 3) for _ in range(rng.randint(1, 12))]
        assert sign_flip_p(differences) == pytest.approx(brute_force_sign_flip(differences))


def test_sign_flip_resampling_is_seeded_and_close_to_exact():
    differences = [0.5, 0.25, 0.75, -0.25, 0.5, 1.0, -0.5, 0.25, 0.5, 0.75, 0.25, -0.25]
    exact = brute_force_sign_flip(differences)
    resampled = sign_flip_p(differences)  # floats: resampled, not exact
    assert resampled == sign_flip_p(differences)
    assert resampled == pytest.approx(exact, abs=0.01)
    with pytest.raises(ValueError, match="10,000"):
        sign_flip_p(differences, resamples=500)


def test_one_attempt_per_test_is_mcnemar_on_discordant_tests():
    a = {"t1": [True], "t2": [True], "t3": [False], "t4": [True], "t5": [False]}
    b = {"t1": [True], "t2": [False], "t3": [True], "t4": [False], "t5": [False], "extra": [True]}
    result = compare_models(a, b, model_a="m1", model_b="m2")
    assert result == PairedComparison("m1", "m2", 5, 2, 1, mcnemar_exact_p(2, 1))


def test_several_attempts_compare_pass_at_1_per_test():
    a = {"t1": [True, True, True], "t2": [True, True, False], "t3": [False, False, False]}
    b = {"t1": [True, False, False], "t2": [True, True, False], "t3": [True, False, False]}
    result = compare_models(a, b, model_a="m1", model_b="m2")
    # pass@1 differences in thirds: 2, 0, −1 → sums over sign flips of (2, −1): 1, 3, −3, −1
    assert (result.tests, result.a_only, result.b_only) == (3, 1, 1)
    assert result.p_value == 1.0
    assert compare_models(a, b, model_a="m1", model_b="m2") == result


def test_a_clear_winner_on_many_tests_is_significant():
    a = {f"t{i}": [True] * 3 for i in range(40)}
    b = {f"t{i}": [i % 4 == 0, False, False] for i in range(40)}
    result = compare_models(a, b, model_a="good", model_b="bad")
    assert result.a_only == 40 and result.b_only == 0
    assert result.p_value == pytest.approx(2 / 2**40)


def test_uneven_attempt_counts_are_compared_exactly():
    a = {"t1": [True, False], "t2": [True, True, True], "t3": [True]}
    b = {"t1": [False, False, False], "t2": [True, False], "t3": [True, True]}
    result = compare_models(a, b, model_a="m1", model_b="m2")
    # in sixths: 3 − 0, 6 − 3, 6 − 6 → (3, 3, 0)
    assert (result.a_only, result.b_only) == (2, 0)
    assert result.p_value == brute_force_sign_flip([3, 3])


def test_no_shared_tests_compare_nothing():
    result = compare_models({"x": [True]}, {"y": [False]}, model_a="m1", model_b="m2")
    assert (result.tests, result.a_only, result.b_only, result.p_value) == (0, 0, 0, 1.0)


per_test_pairs = st.lists(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.lists(st.booleans(), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
        )
    ),
    min_size=0,
    max_size=40,
)


@PROPERTY
@given(per_test_pairs)
def test_paired_p_is_in_0_1_and_symmetric_in_a_and_b(pairs):
    a = {f"t{i}": x for i, (x, _) in enumerate(pairs)}
    b = {f"t{i}": y for i, (_, y) in enumerate(pairs)}
    forward = compare_models(a, b, model_a="A", model_b="B")
    backward = compare_models(b, a, model_a="B", model_b="A")
    assert 0.0 < forward.p_value <= 1.0
    assert forward.p_value == pytest.approx(backward.p_value, rel=1e-12)
    assert (forward.a_only, forward.b_only) == (backward.b_only, backward.a_only)
    assert forward.a_only + forward.b_only <= forward.tests == len(pairs)


# --- Holm and the day's comparisons ---------------------------------------------------------


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 → 3·0.01, 2·0.03, max(1·0.04, 0.06)
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjust([]) == []


@pytest.mark.slow  # statsmodels' multipletests costs ~0.25 s a call: seconds in all
def test_holm_matches_statsmodels_on_random_p_values():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(1979)
    for _ in range(40):  # multipletests takes ~70 ms a call
        p_values = list(rng.uniform(0, 0.2, size=int(rng.integers(1, 20))))
        expected = multipletests(p_values, method="holm")[1]
        assert holm_adjust(p_values) == pytest.approx(list(expected), abs=1e-12)


@PROPERTY
@given(st.lists(st.floats(0.0, 1.0), max_size=30))
def test_holm_is_monotone_capped_and_never_below_raw(p_values):
    adjusted = holm_adjust(p_values)
    assert all(raw <= adj <= 1.0 for raw, adj in zip(p_values, adjusted, strict=True))
    for i, j in itertools.permutations(range(len(p_values)), 2):
        if p_values[i] <= p_values[j]:
            assert adjusted[i] <= adjusted[j]


def test_day_comparisons_in_the_results_file_shape():
    strong = {f"t{i}": [True] for i in range(30)}
    weak = {f"t{i}": [i < 10] for i in range(30)}
    close = {f"t{i}": [i != 3] for i in range(30)}
    comparisons = day_comparisons({"strong": strong, "close": close, "weak": weak})
    assert [list(c) for c in comparisons] == [
        [
            "model_a",
            "model_b",
            "tests",
            "a_only",
            "b_only",
            "p_value",
            "p_adjusted",
            "significant",
        ]
    ] * 3
    by_pair = {(c["model_a"], c["model_b"]): c for c in comparisons}
    assert set(by_pair) == {("strong", "close"), ("strong", "weak"), ("close", "weak")}
    assert by_pair[("strong", "close")] == {
        "model_a": "strong",
        "model_b": "close",
        "tests": 30,
        "a_only": 1,
        "b_only": 0,
        "p_value": 1.0,
        "p_adjusted": 1.0,
        "significant": False,
    }
    strong_weak = by_pair[("strong", "weak")]
    assert (strong_weak["a_only"], strong_weak["b_only"]) == (20, 0)
    assert strong_weak["p_adjusted"] == pytest.approx(3 * 2 / 2**20)
    assert strong_weak["significant"] is True
    assert by_pair[("close", "weak")]["p_adjusted"] >= by_pair[("close", "weak")]["p_value"]


def test_day_comparisons_skip_pairs_without_shared_tests():
    comparisons = day_comparisons({"a": {"x": [True]}, "b": {"y": [True]}, "c": {"x": [False]}})
    assert [(c["model_a"], c["model_b"]) for c in comparisons] == [("a", "c")]
    assert day_comparisons({"only": {"x": [True]}}) == []


def test_attempts_by_model_from_graded_runs():
    passed, failed, error = GradeStatus.PASSED, GradeStatus.FAILED, GradeStatus.ERROR
    outcomes = [
        RunOutcome("t1", "m", 2, failed),
        RunOutcome("t1", "m", 1, passed),
        RunOutcome("t1", "m", 3, error),
        RunOutcome("t2", "n", 1, passed),
    ]
    assert attempts_by_model(outcomes) == {
        "m": {"t1": [True, False, False]},
        "n": {"t2": [True]},
    }


# --- minimum detectable difference ----------------------------------------------------------


def connor_sample_size(delta, discordance, alpha=0.05, power=0.8):
    z_alpha = scipy_stats().norm.ppf(1 - alpha / 2)
    z_power = scipy_stats().norm.ppf(power)
    numerator = z_alpha * math.sqrt(discordance) + z_power * math.sqrt(discordance - delta**2)
    return numerator**2 / delta**2


def test_minimum_detectable_difference_inverts_connors_sample_size():
    rng = random.Random(43)
    for _ in range(300):
        tests, discordance = rng.randint(10, 1000), rng.uniform(0.05, 1.0)
        delta = minimum_detectable_difference(tests, discordance)
        if delta is not None:
            assert connor_sample_size(delta, discordance) == pytest.approx(tests, rel=1e-9)


def test_minimum_detectable_difference_by_hand():
    # ψ = 0.19, n = 43: √0.19·(1.95996·√43 + 0.84162·√(43 − 1.95996² + 0.84162²))/(43 + 0.84162²)
    assert minimum_detectable_difference(43, 0.19) == pytest.approx(0.1811, abs=1e-4)
    assert minimum_detectable_difference(172, 0.19) < minimum_detectable_difference(43, 0.19)
    # two discordant tests in 43 can never reach 80% power
    assert minimum_detectable_difference(43, 2 / 43) is None
    assert minimum_detectable_difference(43, 0.0) is None


def test_detectable_difference_sentence():
    assert detectable_difference_sentence(43, 0.19) == (
        "with 43 tests, differences under ~18 points cannot be told apart"
    )
    assert detectable_difference_sentence(43, 0.0) == (
        "with 43 tests, too few answers differ to tell any difference apart"
    )


# --- judge self-agreement -------------------------------------------------------------------


def test_judge_self_agreement():
    assert judge_self_agreement([True, True, True]) == 1.0
    assert judge_self_agreement([True, False, True]) == pytest.approx(2 / 3)
    assert judge_self_agreement([False, True]) == 0.5
    with pytest.raises(ValueError):
        judge_self_agreement([])

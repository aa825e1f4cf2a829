"""Is a difference real? Intervals on pass rates, paired tests between models, Holm, power."""

from __future__ import annotations

import itertools
import math
import numbers
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from eval_pipeline.grading._metrics import RunOutcome
from eval_pipeline.grading._verdict import GradeStatus

AttemptsByTest = Mapping[str, Sequence[bool]]
"""Test name → whether each of its attempts passed (errors count as not passed)."""

PERMUTATION_SEED = 18
"""Seed of the sign-flip resampling, so the same runs always give the same p-value."""

PERMUTATION_RESAMPLES = 20_000

# Cells (nonzero differences × width of the exact distribution) past which the exact sign-flip
# distribution costs more than resampling; reached only with many distinct attempt counts.
_EXACT_BUDGET = 50_000_000


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    return NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    # Rounding can leave the bounds a hair past p or past [0, 1]; the interval must hold both.
    return max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p))


def wilson_interval(passes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval on a proportion (Wilson 1927; Brown, Cai & DasGupta 2001).

    (p̂ + z²/2n ± z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n). Unlike p̂ ± z·SE it stays in [0, 1]
    and keeps a width when every run passed (or none did), which small suites hit often.

    Args:
        passes: runs that passed.
        n: runs in all (at least 1).
        confidence: coverage of the interval; 0.95 gives the 95% interval.
    """
    if n < 1 or not 0 <= passes <= n:
        raise ValueError(f"need 0 ≤ passes ≤ n and n ≥ 1, got passes={passes}, n={n}")
    return _wilson(passes / n, n, _z(confidence))


def pass_rate_interval(
    attempts: Iterable[Sequence[bool]], *, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval on a pass rate (passed attempts / attempts) over tests, as fractions.

    One attempt per test: the Wilson score interval (see `wilson_interval`).

    Several attempts per test: the attempts of one test are not independent (an easy test
    passes every time), so the test is the unit. The variance of the pass rate is the
    cluster-robust (linearisation) variance of a ratio estimator, T/(T−1)·Σᵢ(cᵢ − p̂·nᵢ)²/N²
    over T tests with cᵢ of nᵢ attempts passed, N = Σnᵢ (Cochran 1977, §6.11) — with equal
    attempts, exactly the squared standard error of the mean per-test pass@1. Rather than
    p̂ ± z·SE, that variance sets the effective sample size n* = p̂(1−p̂)/var, held between T
    (attempts of a test count as one) and N (as independent), and the Wilson interval is
    taken at n* (Korn & Graubard 1998, Survey Methodology 24:193–201). Why not the plain
    ±z·SE (or t) interval: it leaves [0, 1] near 0% and 100% and has no width when every test
    passed every attempt; a cluster bootstrap has the same zero width, is too narrow with
    few tests, and depends on a random stream. When every attempt agrees (p̂ is 0 or 1),
    n* = T.

    Args:
        attempts: per test, whether each attempt passed (errors count as not passed).
        confidence: coverage of the interval; 0.95 gives the 95% interval.

    Returns:
        (low, high), fractions in [0, 1] around passed attempts / attempts.
    """
    per_test = [list(test) for test in attempts]
    if not per_test or any(not test for test in per_test):
        raise ValueError("a pass-rate interval needs at least one test, each with an attempt")
    z = _z(confidence)
    sizes = np.array([len(test) for test in per_test], dtype=float)
    passes = np.array([sum(map(bool, test)) for test in per_test], dtype=float)
    tests, total = len(per_test), float(sizes.sum())
    p = float(passes.sum()) / total
    if total == tests:
        return _wilson(p, total, z)
    if tests == 1 or p in (0.0, 1.0):
        return _wilson(p, tests, z)
    variance = tests / (tests - 1) * float(((passes - p * sizes) ** 2).sum()) / total**2
    # No spread between tests (each passed the same share of its attempts): nothing says the
    # attempts are correlated, so they count as independent.
    n_effective = total if variance == 0.0 else p * (1.0 - p) / variance
    return _wilson(p, min(max(n_effective, tests), total), z)


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar test: p = min(1, 2·P(X ≤ min(a_only, b_only))), X ~ Bin(n, ½).

    With n = a_only + b_only discordant tests, under "no difference" each goes either way
    with probability ½ (McNemar 1947; exact form: Fay 2010, "Two-sided exact tests and
    matching confidence intervals for discrete data", R Journal 2:53–58). The binomial tail
    is summed in integers, Σₖ C(n, k) / 2ⁿ⁻¹, so it is exact up to one final rounding.
    """
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be ≥ 0, got {a_only} and {b_only}")
    n = a_only + b_only
    if n == 0 or a_only == b_only:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(a_only, b_only) + 1))
    return min(1.0, tail / 2 ** (n - 1))


def _integer_differences(pairs: Sequence[tuple[Sequence[bool], Sequence[bool]]]) -> list[int]:
    # pass@1 differences scaled by the lcm of all attempt counts, so sums compare exactly.
    scale = math.lcm(*(len(side) for pair in pairs for side in pair))
    return [
        sum(map(bool, a)) * (scale // len(a)) - sum(map(bool, b)) * (scale // len(b))
        for a, b in pairs
    ]


def sign_flip_p(
    differences: Sequence[int | float],
    *,
    resamples: int = PERMUTATION_RESAMPLES,
    seed: int = PERMUTATION_SEED,
) -> float:
    """Two-sided paired sign-flip permutation test on per-test differences: P(|Σ sᵢdᵢ| ≥ |Σ dᵢ|).

    Under "no difference" each test's difference is as likely negated (Fisher 1935; Good,
    "Permutation, Parametric and Bootstrap Tests of Hypotheses", 2005, §3). Integer
    differences get the exact distribution over all 2ⁿ sign vectors, built one test at a
    time (a convolution, not an enumeration of vectors); otherwise, or when that would be
    too large, `resamples` random sign vectors from a fixed seed, p = (1 + hits)/(1 + R)
    (Phipson & Smyth 2010), never 0. With ±1 differences this is the exact McNemar test.

    Args:
        differences: per test, A's pass@1 minus B's (zeros carry no information).
        resamples: random sign vectors when the exact distribution is not used (≥ 10,000).
        seed: seed of those vectors, so a rerun gives the same p-value.
    """
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return 1.0
    if all(isinstance(d, numbers.Integral) for d in nonzero):
        weights = [abs(int(d)) for d in nonzero]
        width = sum(weights)
        if len(weights) * (2 * width + 1) <= _EXACT_BUDGET:
            observed = abs(sum(int(d) for d in nonzero))
            distribution = np.zeros(2 * width + 1)
            distribution[width] = 1.0  # index i holds P(Σ = i − width)
            for w in weights:
                distribution = 0.5 * (np.roll(distribution, w) + np.roll(distribution, -w))
            sums = np.abs(np.arange(-width, width + 1))
            return min(1.0, float(distribution[sums >= observed].sum()))
    if resamples < 10_000:
        raise ValueError(f"use at least 10,000 resamples, got {resamples}")
    values = np.asarray(nonzero, dtype=float)
    observed_float = abs(float(values.sum()))
    tolerance = 1e-9 * float(np.abs(values).sum())
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < resamples:
        batch = min(2_000, resamples - done)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(batch, len(values)))
        hits += int((np.abs(signs @ values) >= observed_float - tolerance).sum())
        done += batch
    return (1 + hits) / (1 + resamples)


@dataclass(frozen=True)
class PairedComparison:
    """Models A and B on the tests both ran. `a_only`: tests where A did better (passed
    where B failed; with several attempts, a higher pass@1); `b_only` the reverse."""

    model_a: str
    model_b: str
    tests: int
    a_only: int
    b_only: int
    p_value: float


def compare_models(
    a: AttemptsByTest, b: AttemptsByTest, *, model_a: str, model_b: str
) -> PairedComparison:
    """Paired test of two models on their shared tests: is one's pass rate really higher?

    One attempt per test on both sides: the exact McNemar test on the discordant tests
    (`mcnemar_exact_p`). Several attempts on any shared test: the sign-flip permutation
    test on per-test pass@1 differences (`sign_flip_p`), exact for the usual attempt counts.
    Tests only one model ran are left out. Symmetric: swapping A and B swaps a_only and
    b_only and keeps the p-value.

    Args:
        a: model A's attempts per test.
        b: model B's attempts per test.
        model_a: A's model id, carried into the result.
        model_b: B's model id, carried into the result.
    """
    shared = sorted(a.keys() & b.keys())
    pairs = [(a[name], b[name]) for name in shared]
    if any(not side for pair in pairs for side in pair):
        raise ValueError("every shared test needs at least one attempt on each side")
    if all(len(x) == 1 and len(y) == 1 for x, y in pairs):
        a_only = sum(bool(x[0]) and not y[0] for x, y in pairs)
        b_only = sum(bool(y[0]) and not x[0] for x, y in pairs)
        p_value = mcnemar_exact_p(a_only, b_only)
    else:
        differences = _integer_differences(pairs) if pairs else []
        a_only = sum(d > 0 for d in differences)
        b_only = sum(d < 0 for d in differences)
        p_value = sign_flip_p(differences)
    return PairedComparison(model_a, model_b, len(shared), a_only, b_only, p_value)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (Holm 1979), in the input's order.

    The i-th smallest of m p-values becomes max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎): never
    below the raw p, never above 1, and in the same order as the raw p-values. Controls the
    chance of any false "significant" among all pairs of a day at α.
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def attempts_by_model(outcomes: Iterable[RunOutcome]) -> dict[str, dict[str, list[bool]]]:
    """Model → test → passed per attempt (in attempt order), from graded runs."""
    runs: dict[str, dict[str, list[tuple[int, bool]]]] = defaultdict(lambda: defaultdict(list))
    for outcome in outcomes:
        runs[outcome.model][outcome.name].append(
            (outcome.attempt, outcome.status is GradeStatus.PASSED)
        )
    return {
        model: {name: [passed for _, passed in sorted(tries)] for name, tries in tests.items()}
        for model, tests in runs.items()
    }


def day_comparisons(
    attempts: Mapping[str, AttemptsByTest], *, alpha: float = 0.05
) -> list[dict[str, Any]]:
    """Every pair of models on their shared tests, Holm-adjusted across the pairs: the results
    file's `comparisons`.

    Pairs follow the order of `attempts` (pass the models ranked, and model_a is the better
    of each pair); pairs with no shared test compare nothing and are left out.

    Args:
        attempts: model → its attempts per test, e.g. from `attempts_by_model`.
        alpha: family-wise error rate; `significant` is p_adjusted < alpha.

    Returns:
        [{model_a, model_b, tests, a_only, b_only, p_value, p_adjusted, significant}].
    """
    compared = [
        compare_models(attempts[x], attempts[y], model_a=x, model_b=y)
        for x, y in itertools.combinations(attempts, 2)
    ]
    compared = [c for c in compared if c.tests > 0]
    adjusted = holm_adjust([c.p_value for c in compared])
    return [
        {
            "model_a": c.model_a,
            "model_b": c.model_b,
            "tests": c.tests,
            "a_only": c.a_only,
            "b_only": c.b_only,
            "p_value": c.p_value,
            "p_adjusted": p_adjusted,
            "significant": p_adjusted < alpha,
        }
        for c, p_adjusted in zip(compared, adjusted, strict=True)
    ]


def minimum_detectable_difference(
    tests: int, discordance: float, *, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """Smallest pass-rate difference a paired test on `tests` tests finds with `power`.

    Connor's normal approximation to McNemar's test (Connor 1987, Biometrics 43:207–211):
    n = (z₁₋α/₂·√ψ + z_power·√(ψ − δ²))² / δ², with ψ the share of tests the two models split
    on and δ the difference of their pass rates. Solved for δ:
    δ = √ψ·(z₁₋α/₂·√n + z_power·√(n − z₁₋α/₂² + z_power²)) / (n + z_power²). None when even
    δ = ψ (every split test going one way) is out of reach, or nothing was split.

    Args:
        tests: tests both models ran.
        discordance: fraction of them the models split on, ψ = (a_only + b_only) / tests.
        alpha: two-sided significance level.
        power: chance of detecting a difference of the returned size.
    """
    if tests < 1 or not 0.0 <= discordance <= 1.0:
        raise ValueError(f"need tests ≥ 1 and 0 ≤ discordance ≤ 1, got {tests}, {discordance}")
    z_alpha, z_power = _z(1.0 - alpha), NormalDist().inv_cdf(power)
    root = tests - z_alpha**2 + z_power**2
    if discordance == 0.0 or root < 0.0:
        return None
    delta = (
        math.sqrt(discordance)
        * (z_alpha * math.sqrt(tests) + z_power * math.sqrt(root))
        / (tests + z_power**2)
    )
    return delta if delta <= discordance else None


def detectable_difference_sentence(tests: int, discordance: float) -> str:
    """E.g. "with 43 tests, differences under ~18 points cannot be told apart" (80% power, α 0.05)."""
    delta = minimum_detectable_difference(tests, discordance)
    if delta is None:
        return f"with {tests} tests, too few answers differ to tell any difference apart"
    return (
        f"with {tests} tests, differences under ~{round(delta * 100)} points cannot be told apart"
    )


def judge_self_agreement(verdicts: Sequence[bool]) -> float:
    """Share of j re-judgings of one transcript that agree with their majority verdict.

    1.0: the judge always says the same; 0.5 with an even split. Below 1.0 the test's verdict
    can flip on the judge alone, whatever the agent does.
    """
    if not verdicts:
        raise ValueError("judge self-agreement needs at least one verdict")
    passes = sum(map(bool, verdicts))
    return max(passes, len(verdicts) - passes) / len(verdicts)

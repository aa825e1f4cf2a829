"""Anytime-valid intervals on a model's suite pass rate, however a budget spread its attempts."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from eval_pipeline.grading._mixture import PRIOR, log_beta
from eval_pipeline.grading._statistics import AttemptsByTest

_BISECTIONS = 40  # 2⁻⁴⁰: far below any width a report shows


@dataclass(frozen=True)
class PassRateSequence:
    """An anytime-valid interval on one model's suite pass rate (mean over tests of each
    test's pass probability), from `attempts` runs, at level `alpha`."""

    model: str
    low: float
    high: float
    attempts: int
    alpha: float

    @property
    def width(self) -> float:
        """high − low."""
        return self.high - self.low


@functools.lru_cache(maxsize=65_536)
def _test_interval(passes: int, attempts: int, alpha: float) -> tuple[float, float]:
    # Robbins' beta-binomial confidence sequence for one test: {p : m / (pˢ(1−p)ⁿ⁻ˢ) < 1/α},
    # m the Beta(a, a) mixture's marginal likelihood. The set is an interval around s/n
    # (log pˢ(1−p)ⁿ⁻ˢ is concave), so each end is found by bisection. Cached: a day asks for
    # the same few (passes, attempts) over and over.
    if attempts == 0:
        return 0.0, 1.0
    fails = attempts - passes
    bound = log_beta(passes + PRIOR, fails + PRIOR) - log_beta(PRIOR, PRIOR) + math.log(alpha)

    def inside(p: float) -> bool:
        if p <= 0.0 or p >= 1.0:
            return (passes == 0 if p <= 0.0 else fails == 0) and bound < 0.0
        return passes * math.log(p) + fails * math.log1p(-p) > bound

    def edge(outer: float) -> float:
        if inside(outer):
            return outer
        near, far = passes / attempts, outer
        for _ in range(_BISECTIONS):
            middle = (near + far) / 2
            near, far = (middle, far) if inside(middle) else (near, middle)
        return far

    return edge(0.0), edge(1.0)


def per_test_intervals(
    attempts: AttemptsByTest, alpha: float
) -> tuple[list[str], np.ndarray, np.ndarray]:
    names = list(attempts)
    level = alpha / max(len(names), 1)
    bounds = [
        _test_interval(sum(map(bool, attempts[name])), len(attempts[name]), level) for name in names
    ]
    low, high = (np.array(side, dtype=float) for side in zip(*bounds, strict=True))
    return names, low, high


def _suite_low(passes: np.ndarray, fails: np.ndarray, bound: float) -> float:
    # min mean(p) subject to Σ ℓₜ(pₜ) ≥ bound, ℓₜ(p) = sₜ·log p + fₜ·log(1 − p). With the
    # constraint's multiplier 1/c, each test's optimum below its s/n solves
    # c·p² − (c + n)·p + s = 0, whose lower root is taken in the stable form
    # 2s / ((c + n) + √((c + n)² − 4cs)); the summed log-likelihood falls as c grows.
    attempts = passes + fails
    if not passes.any():
        return 0.0

    def at(log_c: float) -> tuple[float, float]:
        c = math.exp(log_c)
        root = np.sqrt((c + attempts) ** 2 - 4.0 * c * passes)
        p = 2.0 * passes / ((c + attempts) + root)
        with np.errstate(divide="ignore", invalid="ignore"):
            loglik = np.where(passes > 0, passes * np.log(p), 0.0) + np.where(
                fails > 0, fails * np.log1p(-p), 0.0
            )
        return float(p.mean()), float(loglik.sum())

    # Regula falsi with the Illinois step (Dowell & Jarratt 1971) on log c: the summed
    # log-likelihood is smooth in it, so a dozen evaluations do what bisection does in sixty.
    near, far = -30.0, 30.0
    h_near, h_far = at(near)[1] - bound, at(far)[1] - bound
    if h_far >= 0.0:
        return at(far)[0]
    side = 0
    for _ in range(_BISECTIONS * 2):
        middle = (near * h_far - far * h_near) / (h_far - h_near)
        h_middle = at(middle)[1] - bound
        if h_middle >= 0.0:
            near, h_near = middle, h_middle
            h_far, side = (h_far / 2, 0) if side == 1 else (h_far, 1)
        else:
            far, h_far = middle, h_middle
            h_near, side = (h_near / 2, 0) if side == -1 else (h_near, -1)
        if far - near < 1e-9 or 0.0 <= h_near < 1e-8:  # ~1e-10 in the pass rate
            break
    return at(near)[0]


def pass_rate_sequence(attempts: AttemptsByTest, *, model: str, alpha: float) -> PassRateSequence:
    """Anytime-valid interval on a model's suite pass rate, the mean over its T tests of each
    test's pass probability, valid however the attempts were spread over the tests.

    For every vector p of per-test pass probabilities, Mₚ = Πₜ mₜ / Lₜ(pₜ) is a test
    martingale under p: mₜ is test t's Beta(a, a) mixture likelihood of its attempts and
    Lₜ(pₜ) = pₜ^sₜ(1 − pₜ)^fₜ its likelihood at pₜ (Robbins 1970; the method of mixtures of
    Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
    confidence sequences", Annals of Statistics 49:1055–1080). A run multiplies only its own
    test's factor, by a factor of conditional mean 1 whichever test was chosen, so Mₚ stays
    a martingale under adaptive allocation, and by Ville's inequality the true p keeps
    Mₚ < 1/α at every look with probability 1 − α. The interval is the range of mean(p) over
    every p with Mₚ < 1/α, i.e. Σₜ log Lₜ(pₜ) > Σₜ log mₜ − log(1/α) (a convex set, so the
    range is an interval, found through its Lagrange multiplier). It shares one α across the
    tests: a union bound of per-test sequences at α/T would pay log(T/α) on every test (on
    40 stable tests with 8 attempts each, a low of 0.35 against this one's 0.81). A test with
    no attempt yet counts as anywhere in [0, 1].

    Args:
        attempts: the model's attempts per test, in attempt order.
        model: the model id, carried into the result.
        alpha: the chance the interval ever misses the pass rate.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    if not attempts:
        raise ValueError("a pass-rate interval needs at least one test")
    tallies = sorted((sum(map(bool, tries)), len(tries)) for tries in attempts.values())
    low, high = _suite_interval(tuple(tallies), alpha)
    runs = sum(n for _, n in tallies)
    return PassRateSequence(model, low, high, runs, alpha)


@functools.lru_cache(maxsize=4_096)
def _suite_interval(tallies: tuple[tuple[int, int], ...], alpha: float) -> tuple[float, float]:
    # Cached on the sorted (passes, attempts) per test: the interval does not depend on which
    # test is which, and the budget loop asks for the same day's interval more than once.
    passes = np.array([s for s, _ in tallies], dtype=float)
    fails = np.array([n - s for s, n in tallies], dtype=float)
    mixture = sum(log_beta(s + PRIOR, n - s + PRIOR) - log_beta(PRIOR, PRIOR) for s, n in tallies)
    bound = mixture + math.log(alpha)
    low = _suite_low(passes, fails, bound)
    high = 1.0 - _suite_low(fails, passes, bound)
    return max(0.0, low), min(1.0, high)

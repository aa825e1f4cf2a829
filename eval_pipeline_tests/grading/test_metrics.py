"""pass@k, pass^k, flakiness, per-model summaries and ranking, judge–human agreement."""

from __future__ import annotations

import pytest

from eval_pipeline.grading import (
    GradeStatus,
    RunOutcome,
    agreement,
    case_metrics,
    pass_at_k,
    summarize_models,
)

P, F, E = GradeStatus.PASSED, GradeStatus.FAILED, GradeStatus.ERROR


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 3, 3) == 1.0  # fewer failures than k: some pass is certain
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_case_metrics_per_case_and_model():
    outcomes = (
        [RunOutcome("a", "m", i, s) for i, s in enumerate([P, F, P])]
        + [RunOutcome("b", "m", i, s) for i, s in enumerate([P, P, P])]
        + [RunOutcome("a", "n", i, s) for i, s in enumerate([E, F, F])]
    )
    by_key = {(m.name, m.model): m for m in case_metrics(outcomes)}
    a = by_key[("a", "m")]
    assert (a.attempts, a.passes, a.pass_at_1, a.pass_at_k, a.pass_hat_k, a.flaky) == (
        3,
        2,
        2 / 3,
        1.0,
        False,
        True,
    )
    assert by_key[("b", "m")].pass_hat_k and not by_key[("b", "m")].flaky
    assert by_key[("a", "n")].errors == 1 and by_key[("a", "n")].pass_at_k == 0.0


def test_models_rank_by_pass_rate_then_cost_and_errors_count_as_not_passed():
    outcomes = [
        RunOutcome(
            "a", "cheap", 0, P, tokens=100, cost_usd=0.01, duration_ms=1000, tool_call_count=2
        ),
        RunOutcome("b", "cheap", 0, E, tokens=0, cost_usd=None, duration_ms=3000),
        RunOutcome(
            "a", "pricey", 0, P, tokens=300, cost_usd=0.05, duration_ms=2000, tool_call_count=1
        ),
        RunOutcome(
            "b", "pricey", 0, F, tokens=300, cost_usd=0.05, duration_ms=4000, tool_call_count=3
        ),
        RunOutcome("a", "unpriced", 0, P),
        RunOutcome("b", "unpriced", 0, F),
        RunOutcome("a", "best", 0, P, cost_usd=9.0),
    ]
    summaries = summarize_models(outcomes)
    assert [s.model for s in summaries] == ["best", "cheap", "pricey", "unpriced"]
    cheap = summaries[1]
    assert (cheap.passed, cheap.errors, cheap.pass_rate) == (1, 1, 0.5)
    assert cheap.cost_usd == 0.01 and cheap.cost_complete is False
    assert cheap.duration_p50_ms == 2000 and cheap.duration_p95_ms == pytest.approx(2900)
    assert summaries[3].cost_usd is None  # no price anywhere: unknown, never 0


def test_agreement_raw_and_kappa_with_counts():
    pairs = [(True, True)] * 20 + [(False, False)] * 15 + [(True, False)] * 5 + [(False, True)] * 10
    result = agreement(pairs)
    assert (result.n, result.agreements, result.raw) == (50, 35, 0.7)
    # judge passes 25/50, human 30/50: chance = .5*.6 + .5*.4 = .5, kappa = (.7-.5)/.5
    assert result.kappa == pytest.approx(0.4)
    assert (result.judge_pass_human_fail, result.judge_fail_human_pass) == (5, 10)
    assert agreement([(True, True)] * 3).kappa is None
    assert agreement([]).raw is None

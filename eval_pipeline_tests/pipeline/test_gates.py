"""The checks of a model's day (minimum accuracy, no regression) as plain functions over the store."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from eval_pipeline.pipeline import check_partition, summarize_grades
from eval_pipeline.store import StateFolder, ensure_database, write_rows

MODEL = "openai:gpt-4.1"
DAY = date(2026, 6, 2)


def _grade(name: str, attempt: int, passed: bool, day: date) -> dict:
    return {
        "name": name,
        "model": MODEL,
        "run_date": day,
        "attempt": attempt,
        "status": "passed" if passed else "failed",
        "passed": passed,
        "verified": True,
        "tokens": 10,
        "cost_usd": None,
        "duration_ms": 5.0,
        "tool_call_count": 1,
    }


@pytest.fixture
def layout(tmp_path: Path) -> StateFolder:
    layout = StateFolder(tmp_path / ".eval")
    ensure_database(layout)
    return layout


def _write_day(layout: StateFolder, day: date, verdicts: dict[str, list[bool]]) -> list[dict]:
    rows = [
        _grade(name, attempt, passed, day)
        for name, attempts in verdicts.items()
        for attempt, passed in enumerate(attempts)
    ]
    write_rows(layout, "grades", rows, model=MODEL, run_date=day)
    return rows


def test_a_test_that_passed_on_the_previous_evaluated_day_and_fails_now_regressed(layout):
    # Two days back (the day between had no evaluation): both tests passed every attempt.
    _write_day(layout, DAY - timedelta(days=2), {"revenue": [True, True], "orders": [True, True]})
    today = _write_day(layout, DAY, {"revenue": [True, False], "orders": [True, True]})

    checks = check_partition(
        layout,
        MODEL,
        DAY,
        summarize_grades(today).cases,
        min_accuracy=0.8,
        mode="average",
    )

    assert checks.regression.regressed == ["revenue"]
    assert checks.regression.message == "regressed since 2026-05-31: revenue"
    assert checks.accuracy.accuracy == pytest.approx(0.75)  # mean of 1/2 and 2/2
    assert not checks.accuracy.passed
    assert checks.accuracy.message == "average accuracy 75.0% is below the minimum 80.0%"


def test_every_test_must_reach_the_minimum_in_mode_all(layout):
    today = _write_day(layout, DAY, {"revenue": [True, False], "orders": [True, True]})

    checks = check_partition(
        layout, MODEL, DAY, summarize_grades(today).cases, min_accuracy=0.5, mode="all"
    )
    assert checks.accuracy.passed
    checks = check_partition(
        layout, MODEL, DAY, summarize_grades(today).cases, min_accuracy=0.6, mode="all"
    )
    assert not checks.accuracy.passed
    assert checks.accuracy.below == [("revenue", 0.5)]
    # The model's first day: nothing to regress from.
    assert checks.regression.message == "no earlier evaluated day to compare with"


def test_a_day_without_grades_has_no_accuracy_and_no_regression(layout):
    _write_day(layout, DAY - timedelta(days=1), {"revenue": [True]})

    checks = check_partition(layout, MODEL, DAY, [], min_accuracy=None, mode="average")

    assert checks.accuracy.passed and checks.accuracy.accuracy == 0.0
    assert checks.regression.regressed == []
    assert checks.regression.message == "no regression since 2026-06-01"


# --- is a drop real? -----------------------------------------------------------------------


def _checks(layout: StateFolder, today: list[dict], *, significant_only: bool):
    return check_partition(
        layout,
        MODEL,
        DAY,
        summarize_grades(today).cases,
        min_accuracy=None,
        mode="average",
        significant_only=significant_only,
    )


def test_significant_only_lets_one_flipped_test_pass_as_noise(layout):
    names = [f"t{i}" for i in range(10)]
    _write_day(layout, DAY - timedelta(days=1), {n: [True] for n in names})
    today = _write_day(layout, DAY, {n: [n != "t0"] for n in names})

    default = _checks(layout, today, significant_only=False)
    assert not default.regression_passed  # the default stays as before: any regressed test
    assert default.regression_message == "regressed since 2026-06-01: t0"

    lenient = _checks(layout, today, significant_only=True)
    assert lenient.regression.regressed == ["t0"]
    # One test of ten flipped: exact McNemar p = 1.0.
    assert lenient.regression.paired.b_only == 1 and lenient.regression.paired.p_value == 1.0
    assert lenient.regression_passed
    assert lenient.regression_message == (
        "regressed since 2026-06-01: t0; paired test: 0 better, 1 worse on 10 shared tests, "
        "p = 1.000 (not significant), so no significant drop (test.regression.significant_only)"
    )


def test_significant_only_fails_on_a_significant_drop(layout):
    names = [f"t{i}" for i in range(10)]
    _write_day(layout, DAY - timedelta(days=1), {n: [True, True] for n in names})
    # Eight of ten tests now fail every attempt: sign-flip p = 2/2^8.
    today = _write_day(layout, DAY, {n: [n in ("t8", "t9")] * 2 for n in names})

    checks = _checks(layout, today, significant_only=True)
    assert checks.regression.paired.p_value == pytest.approx(2 / 256)
    assert not checks.regression_passed
    assert "p = 0.008 (significant)" in checks.regression_message

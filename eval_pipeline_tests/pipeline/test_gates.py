"""The checks of a model's day (minimum accuracy, no regression) as plain functions over the store."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from eval_pipeline.pipeline import check_partition, summarize_grades
from eval_pipeline.store import StoreLayout, ensure_database, write_rows

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
def layout(tmp_path: Path) -> StoreLayout:
    layout = StoreLayout(tmp_path / ".eval")
    ensure_database(layout)
    return layout


def _write_day(layout: StoreLayout, day: date, verdicts: dict[str, list[bool]]) -> list[dict]:
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

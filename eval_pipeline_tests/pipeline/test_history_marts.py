"""The history marts (dbt over the results): pass-rate trend, flaky cases and regressions."""

from __future__ import annotations

from datetime import date

import dagster as dg
import duckdb
import pytest

from eval_pipeline.defs import materialize
from eval_pipeline.pipeline import summarize_partition
from eval_pipeline.pipeline._gates import since_previous_day
from eval_pipeline.store import ensure_database, table_names, write_rows
from eval_pipeline.suite import load_suite
from eval_pipeline.viewer import _data as viewer_data
from eval_pipeline.viewer._reader import StoreReader
from eval_pipeline_tests.pipeline.small_suite import SmallSuite

DAY_1, DAY_2, DAY_3 = date(2026, 6, 1), date(2026, 6, 2), date(2026, 6, 3)
A, B = "openai:gpt-a", "openai:gpt-b"
MARTS = ["history/pass_rate_trend", "history/flaky_cases", "history/regressions"]

# (model, day) -> {case: outcome of each of the 2 attempts}
HISTORY = {
    (A, DAY_1): {"total_revenue": "PP", "customer_count": "PP", "orders_by_region": "PF"},
    (A, DAY_2): {"total_revenue": "FF", "customer_count": "PP", "orders_by_region": "PP"},
    (B, DAY_1): {"total_revenue": "PP", "customer_count": "PP", "orders_by_region": "PP"},
    (B, DAY_2): {"total_revenue": "PP", "customer_count": "PP", "orders_by_region": "PP"},
}


def grade_rows(model: str, day: date, outcomes: dict[str, str]) -> list[dict]:
    return [
        {
            "name": name,
            "model": model,
            "run_date": day,
            "attempt": attempt,
            "status": "passed" if mark == "P" else "failed",
            "passed": mark == "P",
            "message": "match" if mark == "P" else f"{name}: first difference in row 1",
            "verified": True,
            "tokens": 100,
        }
        for name, marks in outcomes.items()
        for attempt, mark in enumerate(marks)
    ]


@pytest.mark.slow
def test_history_marts_show_the_trend_flaky_cases_and_regressions(small_suite: SmallSuite):
    layout = small_suite.layout
    ensure_database(layout)
    suite = load_suite(small_suite.root)
    # an earlier write of B's second day, all failing, superseded by the later one
    write_rows(
        layout, "grades", grade_rows(B, DAY_2, {"total_revenue": "FF"}), model=B, run_date=DAY_2
    )
    for (model, day), outcomes in HISTORY.items():
        write_rows(layout, "grades", grade_rows(model, day, outcomes), model=model, run_date=day)
        summarize_partition(suite, model, day, layout=layout)

    defs = small_suite.definitions()
    marts = defs.resolve_assets_def(dg.AssetKey(["history", "regressions"]))
    assert {dep.path[-1] for dep in marts.asset_deps[dg.AssetKey(["history", "regressions"])]} == {
        "grades"
    }
    assert marts.group_names_by_key[dg.AssetKey(["history", "flaky_cases"])] == "history"

    reader = duckdb.connect(str(layout.database), read_only=True)  # a person's open session
    try:
        result = materialize(defs, MARTS, instance=dg.DagsterInstance.ephemeral())
    finally:
        reader.close()
    assert result.success
    checks = result.get_asset_check_evaluations()
    assert checks and all(check.passed for check in checks)

    with duckdb.connect(str(layout.history_database), read_only=True) as history:
        trend = history.execute(
            "SELECT model, run_date, passed, total, round(pass_rate, 4), "
            "round(pass_rate_change, 4) FROM pass_rate_trend ORDER BY model, run_date"
        ).fetchall()
        flaky = history.execute(
            "SELECT name, model, run_date, attempts, passes FROM flaky_cases"
        ).fetchall()
        regressions = history.execute(
            "SELECT name, model, run_date, previous_date, first_failure FROM regressions"
        ).fetchall()
    assert trend == [
        (A, DAY_1, 5, 6, 0.8333, None),
        (A, DAY_2, 4, 6, 0.6667, -0.1667),
        (B, DAY_1, 6, 6, 1.0, None),
        (B, DAY_2, 6, 6, 1.0, 0.0),
    ]
    assert flaky == [("orders_by_region", A, DAY_1, 2, 1)]
    assert regressions == [
        ("total_revenue", A, DAY_2, DAY_1, "total_revenue: first difference in row 1")
    ]
    with duckdb.connect(str(layout.database), read_only=True) as results:
        tables = results.execute("SELECT table_name FROM information_schema.tables").fetchall()
    assert {t for (t,) in tables} == set(table_names())  # the marts never write to results.duckdb


# A gap: A is not evaluated on DAY_2, so its DAY_3 compares with DAY_1 (the calendar day
# before has no results); B runs every day. (model, day) -> {case: attempts}
GAPPED = {
    (A, DAY_1): {"total_revenue": "PP", "customer_count": "PP", "orders_by_region": "FF"},
    (A, DAY_3): {"total_revenue": "PF", "customer_count": "PP", "orders_by_region": "PP"},
    (B, DAY_1): {"total_revenue": "PP", "customer_count": "PP"},
    (B, DAY_2): {"total_revenue": "FF", "customer_count": "PP"},
    (B, DAY_3): {"total_revenue": "FF", "customer_count": "FP"},
}


@pytest.mark.slow
@pytest.mark.parametrize("store", ["local", "bucket"])
def test_the_mart_the_check_and_the_viewer_agree_on_what_regressed(
    small_suite: SmallSuite, store: str, request: pytest.FixtureRequest
):
    if store == "bucket":  # every table in a bucket (moto_server), read from there
        small_suite.config["store"] = request.getfixturevalue("bucket").store_config
        small_suite.write_config()
    layout = small_suite.layout
    ensure_database(layout)
    for (model, day), outcomes in GAPPED.items():
        write_rows(layout, "grades", grade_rows(model, day, outcomes), model=model, run_date=day)
    result = materialize(
        small_suite.definitions(), ["history/regressions"], instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    with duckdb.connect(str(layout.history_database), read_only=True) as history:
        mart = history.execute(
            "SELECT model, run_date, name, previous_date FROM regressions ORDER BY ALL"
        ).fetchall()

    python, improved = [], []
    for model, day in GAPPED:
        diff = since_previous_day(layout, model, day)
        python += [(model, day, name, diff.base) for name in diff.regressed]
        improved += [(model, day, name, diff.base) for name in diff.improved]
    reader = StoreReader(layout)
    try:
        with reader.cursor() as con:
            changes = viewer_data.day_changes(con, DAY_1, DAY_3)
    finally:
        reader.close()
    viewer = [
        (r["model"], r["run_date"], r["name"], r["previous_date"])
        for r in changes
        if r["change"] == "regressed"
    ]
    # the viewer's improvements are `diff_days`' too
    assert (
        sorted(
            (r["model"], r["run_date"], r["name"], r["previous_date"])
            for r in changes
            if r["change"] == "improved"
        )
        == sorted(improved)
        == [(A, DAY_3, "orders_by_region", DAY_1)]
    )  # across the gap too

    expected = [
        (A, DAY_3, "total_revenue", DAY_1),  # across the gap
        (B, DAY_2, "total_revenue", DAY_1),
        (B, DAY_3, "customer_count", DAY_2),
    ]
    assert mart == sorted(python) == sorted(viewer) == expected

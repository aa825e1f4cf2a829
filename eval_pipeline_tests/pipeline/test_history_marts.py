"""The history marts (dbt over the results): pass-rate trend, flaky cases and regressions.

A dbt build costs tens of seconds, so the local store's marts are built once for the module,
over two histories under different models (`HISTORY` for A and B, `GAPPED` for C and D):
each test reads its own models' rows, exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import dagster as dg
import duckdb
import pytest

from eval_pipeline.pipeline import since_previous_day, summarize_partition
from eval_pipeline.store import ensure_database, table_names, write_rows
from eval_pipeline.suite import load_suite
from eval_pipeline.viewer import StoreReader
from eval_pipeline.viewer import (
    _data as viewer_data,
)  # the unit itself: the viewer's day-changes query
from eval_pipeline_tests.pipeline.small_suite import (
    SmallSuite,
    materialize,
    open_small_suite,
    seed_history_manifest,
)

DAY_1, DAY_2, DAY_3 = date(2026, 6, 1), date(2026, 6, 2), date(2026, 6, 3)
A, B = "openai:gpt-a", "openai:gpt-b"
C, D = "openai:gpt-c", "openai:gpt-d"
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


def write_history(layout, suite) -> None:
    """HISTORY's grades and summaries, after an earlier write of B's second day (all failing)
    that the later one supersedes."""
    write_rows(
        layout, "grades", grade_rows(B, DAY_2, {"total_revenue": "FF"}), model=B, run_date=DAY_2
    )
    for (model, day), outcomes in HISTORY.items():
        write_rows(layout, "grades", grade_rows(model, day, outcomes), model=model, run_date=day)
        summarize_partition(suite, model, day, layout=layout)


def write_gapped(layout) -> None:
    for (model, day), outcomes in GAPPED.items():
        write_rows(layout, "grades", grade_rows(model, day, outcomes), model=model, run_date=day)


@pytest.fixture(scope="module")
def local_marts(
    history_dbt_target, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SmallSuite, dg.Definitions, dg.ExecuteInProcessResult]]:
    """A local store holding HISTORY and GAPPED, its three marts built once while a person's
    session holds results.duckdb open."""
    with open_small_suite(tmp_path_factory.mktemp("marts") / "suite") as small_suite:
        seed_history_manifest(small_suite, history_dbt_target)
        layout = small_suite.layout
        ensure_database(layout)
        write_history(layout, load_suite(small_suite.root))
        write_gapped(layout)
        defs = small_suite.definitions()
        reader = duckdb.connect(str(layout.database), read_only=True)  # a person's open session
        try:
            result = materialize(defs, MARTS, instance=dg.DagsterInstance.ephemeral())
        finally:
            reader.close()
        yield small_suite, defs, result


@pytest.mark.slow
def test_history_marts_show_the_trend_flaky_cases_and_regressions(local_marts):
    """The marts hang below `grades` in group `history`; built beside an open reader, their
    checks pass and they hold the exact trend, flaky cases and regressions of HISTORY (the
    superseded write left out), written to history.duckdb only."""
    small_suite, defs, result = local_marts
    layout = small_suite.layout
    marts = defs.resolve_assets_def(dg.AssetKey(["history", "regressions"]))
    assert {dep.path[-1] for dep in marts.asset_deps[dg.AssetKey(["history", "regressions"])]} == {
        "grades"
    }
    assert marts.group_names_by_key[dg.AssetKey(["history", "flaky_cases"])] == "history"

    assert result.success
    checks = result.get_asset_check_evaluations()
    assert checks and all(check.passed for check in checks)

    ours = f"model IN ('{A}', '{B}')"  # GAPPED's models are the other test's
    with duckdb.connect(str(layout.history_database), read_only=True) as history:
        trend = history.execute(
            "SELECT model, run_date, passed, total, round(pass_rate, 4), "
            f"round(pass_rate_change, 4) FROM pass_rate_trend WHERE {ours} ORDER BY model, run_date"
        ).fetchall()
        flaky = history.execute(
            f"SELECT name, model, run_date, attempts, passes FROM flaky_cases WHERE {ours}"
        ).fetchall()
        regressions = history.execute(
            "SELECT name, model, run_date, previous_date, first_failure FROM regressions "
            f"WHERE {ours}"
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


# A gap: C is not evaluated on DAY_2, so its DAY_3 compares with DAY_1 (the calendar day
# before has no results); D runs every day. (model, day) -> {case: attempts}
GAPPED = {
    (C, DAY_1): {"total_revenue": "PP", "customer_count": "PP", "orders_by_region": "FF"},
    (C, DAY_3): {"total_revenue": "PF", "customer_count": "PP", "orders_by_region": "PP"},
    (D, DAY_1): {"total_revenue": "PP", "customer_count": "PP"},
    (D, DAY_2): {"total_revenue": "FF", "customer_count": "PP"},
    (D, DAY_3): {"total_revenue": "FF", "customer_count": "FP"},
}


@pytest.mark.slow
@pytest.mark.parametrize("store", ["local", "bucket"])
def test_the_mart_the_check_and_the_viewer_agree_on_what_regressed(
    store: str, request: pytest.FixtureRequest
):
    """The regressions mart, the no-regression check's Python rule and the viewer's day
    changes name the same regressions (and improvements), across a gap too, for a local
    store and a bucket."""
    if store == "local":  # the module's marts, built over GAPPED (and HISTORY, other models)
        small_suite, _, result = request.getfixturevalue("local_marts")
    else:  # every table in a bucket (moto_server), read from there; GAPPED alone
        small_suite = request.getfixturevalue("small_suite")
        small_suite.config["store"] = request.getfixturevalue("bucket").store_config
        small_suite.write_config()
        ensure_database(small_suite.layout)
        write_gapped(small_suite.layout)
        result = materialize(
            small_suite.definitions(),
            ["history/regressions"],
            instance=dg.DagsterInstance.ephemeral(),
        )
    layout = small_suite.layout
    assert result.success
    with duckdb.connect(str(layout.history_database), read_only=True) as history:
        mart = history.execute(
            "SELECT model, run_date, name, previous_date FROM regressions "
            f"WHERE model IN ('{C}', '{D}') ORDER BY ALL"
        ).fetchall()

    python, improved = [], []
    for model, day in GAPPED:
        diff = since_previous_day(layout, model, day)
        python += [(model, day, name, diff.base) for name in diff.regressed]
        improved += [(model, day, name, diff.base) for name in diff.improved]
    reader = StoreReader(layout)
    try:
        with reader.cursor() as con:
            changes = [
                r for r in viewer_data.day_changes(con, DAY_1, DAY_3) if r["model"] in (C, D)
            ]
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
        == [(C, DAY_3, "orders_by_region", DAY_1)]
    )  # across the gap too

    expected = [
        (C, DAY_3, "total_revenue", DAY_1),  # across the gap
        (D, DAY_2, "total_revenue", DAY_1),
        (D, DAY_3, "customer_count", DAY_2),
    ]
    assert mart == sorted(python) == sorted(viewer) == expected, store

"""Edits show as unsynced within a sensor tick, and automation follows the data.

The sensors and the automation conditions are evaluated as the daemon evaluates them
(`evaluate_tick`, `dg.evaluate_automation_conditions`), and what they request is executed in
this process against the same instance, tick after tick, as the daemon's runs would be.
"""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus

from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import model_day_key, today
from eval_pipeline.defs.watch import observe_settings
from eval_pipeline.suite import load_config
from eval_pipeline_tests.pipeline.automation import (
    drive,
    fresh,
    materialized,
    run_partition,
    run_requested,
    runs_of,
    status,
    tick,
    watch_tick,
)
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    NEXT_DAY,
    evaluate,
    materialize,
    prepare,
)

pytestmark = pytest.mark.slow  # each test starts Dagster runs

INPUTS = ["test_cases", "agent_context", "grading_rules"]


def evaluated(small_suite, instance, day: str) -> tuple[dg.Definitions, str | None]:
    """`day` evaluated for every model, the daemon's ticks run until nothing is left to
    request: the definitions and the last tick's cursor. The settings in eval_config.yaml
    are observed first, as the command line and the watch sensor's first tick do: read by a
    grading_rules that was made before, their first observation would unsync every grade."""
    observe_settings(instance, load_config(small_suite.root), MODELS, UNNAMED)
    defs = prepare(small_suite, instance, day)
    for model in MODELS:
        evaluate(defs, instance, model, day)
    cursor, _ = drive(defs, instance)
    return defs, cursor


def test_an_edited_test_file_marks_every_models_runs_unsynced_naming_the_test(
    small_suite, instance
):
    defs = prepare(small_suite, instance)
    for model in MODELS:
        evaluate(defs, instance, model)
    assert watch_tick(defs, instance).skip_message == (
        "the test files and the context are as last read"
    )

    small_suite.edit_case("total_revenue", prompt="What is the total revenue, in USD?")
    (request,) = watch_tick(defs, instance).run_requests
    assert request.asset_selection == [dg.AssetKey("test_cases")]
    run_requested(defs, instance, request)
    for model in MODELS:
        assert status(defs, instance, "agent_runs", model) == (
            StaleStatus.STALE,
            [("test_cases", "has a new data version")],
        )
    event = instance.get_latest_materialization_event(dg.AssetKey("test_cases"))
    changed = event.asset_materialization.metadata
    assert changed["changed_tests"].value == "edited: total_revenue"
    assert changed["changes"].value == {"added": [], "edited": ["total_revenue"], "removed": []}
    # the request is made once: the next tick finds the tests as last read
    assert not watch_tick(defs, instance).run_requests

    rules = small_suite.root / "RULES.md"
    rules.write_text(rules.read_text() + "Cancelled orders never count.\n")
    (request,) = watch_tick(defs, instance).run_requests
    assert request.asset_selection == [dg.AssetKey("agent_context")]
    run_requested(defs, instance, request)
    event = instance.get_latest_materialization_event(dg.AssetKey("agent_context"))
    assert event.asset_materialization.metadata["changed_files"].value == "edited: RULES.md"
    assert status(defs, instance, "agent_runs", MODELS[1])[0] is StaleStatus.STALE


def test_a_broken_test_file_is_named_by_the_sensor_and_nothing_is_rematerialized(
    small_suite, instance
):
    defs = prepare(small_suite, instance)
    small_suite.case_file("total_revenue").write_text("prompt: [unclosed\n")
    result = watch_tick(defs, instance)
    assert not result.run_requests
    assert "total_revenue.yml" in result.skip_message and "\n" not in result.skip_message


def test_a_backfill_of_runs_for_two_past_days_ends_with_their_grades_summaries_and_report(
    small_suite, instance
):
    defs = small_suite.definitions()
    assert materialize(defs, INPUTS, instance=instance).success
    cursor, _ = drive(defs, instance)  # today's references, as the daemon would on a new day

    days = (DAY, NEXT_DAY)
    for day in days:  # what a backfill of agent_runs over two days and both models launches
        for model in MODELS:
            evaluate(defs, instance, model, day, assets=["agent_runs"])
    _, ticks = drive(defs, instance, cursor)

    keys = {str(model_day_key(model, day)) for model in MODELS for day in days}
    assert set(days) <= materialized(instance, "reference_results")
    assert keys <= materialized(instance, "grades")
    assert keys <= materialized(instance, "model_summaries")
    assert set(days) <= materialized(instance, "leaderboard")
    assert set(days) <= materialized(instance, "report")
    # each stage in a tick after its parent's, or in its parent's tick when they share the
    # partitions (one run each): a partition's grades and summary, a day's leaderboard and report
    order = ["reference_results", "grades", "model_summaries", "leaderboard", "report"]
    first_tick = {
        asset: next(i for i, asked in enumerate(ticks) if any(a == asset for a, _ in asked))
        for asset in order
    }
    assert [first_tick[a] for a in order] == sorted(first_tick[a] for a in order)
    assert first_tick["grades"] == first_tick["model_summaries"], ticks
    assert first_tick["leaderboard"] == first_tick["report"], ticks
    assert len(set(first_tick.values())) == 3, ticks


def test_grades_wait_while_their_runs_are_unsynced_and_the_rerun_is_followed_by_one_run(
    small_suite, instance
):
    day = today().isoformat()
    defs, cursor = evaluated(small_suite, instance, day)

    small_suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")
    (request,) = watch_tick(defs, instance).run_requests
    run_requested(defs, instance, request)
    result, asked = tick(defs, instance, cursor)
    # the day's references (and the variants) follow the tests; grades wait for the runs
    assert asked == {("reference_results", day), ("warehouse_variants", None)}
    for asset, partition in asked:
        run_partition(defs, instance, asset, partition)
    result, asked = tick(defs, instance, result.cursor)
    assert asked == set()

    # "Materialize…" on the unsynced partition from the asset page of agent_runs: its grades
    # and summary follow in one run, then its day's leaderboard and report in one run
    evaluate(defs, instance, MODELS[0], day, assets=["agent_runs"])
    stale = str(model_day_key(MODELS[0], day))
    result, asked = tick(defs, instance, result.cursor)
    assert runs_of(asked) == {stale: ["grades", "model_summaries"]}
    run_partition(defs, instance, ["grades", "model_summaries"], stale)
    result, asked = tick(defs, instance, result.cursor)
    assert runs_of(asked) == {day: ["leaderboard", "report"]}
    run_partition(defs, instance, ["leaderboard", "report"], day)
    result, asked = tick(defs, instance, result.cursor)
    assert asked == set()
    assert fresh(defs, instance, "model_summaries", model_day_key(MODELS[0], day))
    assert fresh(defs, instance, "report", day)


def test_rereading_unchanged_inputs_from_the_ui_starts_nothing(small_suite, instance):
    # "Materialize" on the suite's inputs with nothing edited: the same data versions, so no
    # run or grade of today is out of date, and nothing of the day may run again
    defs, cursor = evaluated(small_suite, instance, today().isoformat())

    assert materialize(defs, INPUTS, instance=instance, tags={"eval_pipeline/source": "ui"}).success
    result, asked = tick(defs, instance, cursor)
    assert asked == set()

    # an edit read the same way still carries through (the grading rules: only grades)
    config = small_suite.root / "eval_config.yaml"
    config.write_text(
        config.read_text().replace("test:\n", "test:\n  comparison: {decimals: 1}\n", 1)
    )
    assert materialize(
        defs, ["grading_rules"], instance=instance, tags={"eval_pipeline/source": "ui"}
    ).success
    _, asked = tick(defs, instance, result.cursor)
    assert {asset for asset, _ in asked} == {"grades", "model_summaries"}, asked

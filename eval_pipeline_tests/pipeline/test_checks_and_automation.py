"""The asset checks on model_summaries, the daily schedule and the model-partition sensor."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline_tests.agents.steps import error
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    NEXT_DAY,
    RIGHT_SQL,
    WRONG_SQL,
    evaluate,
    materialize,
    metadata,
    prepare,
)

# Every test starts Dagster (instances, jobs, schedule and sensor evaluations).
pytestmark = pytest.mark.slow


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {check.check_name: check for check in result.get_asset_check_evaluations()}


def test_min_accuracy_in_average_and_all_modes(small_suite, instance):
    small_suite.analyst.sql["total_revenue"] = WRONG_SQL["total_revenue"]  # 3 of 4 tests pass
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0], assets=["agent_runs", "grades"])

    def min_accuracy(threshold: float, mode: str) -> dg.AssetCheckEvaluation:
        small_suite.write_config(min_accuracy=threshold, threshold_mode=mode)
        return checks(evaluate(defs, instance, MODELS[0], assets=["model_summaries"]))[
            "min_accuracy"
        ]

    assert min_accuracy(0.7, "average").passed
    below = min_accuracy(0.8, "average")
    assert not below.passed
    assert below.description == (
        f"{MODELS[0]} on {DAY}: average accuracy 75.0% is below the minimum 80.0% (3/4 runs passed)"
    )
    assert below.metadata["accuracy"].value == "75.0%"
    # one result per (model, day) partition, so the check's history says which it was
    assert below.partition == model_day_key(MODELS[0], DAY)
    every = min_accuracy(0.7, "all")
    assert not every.passed
    assert "total_revenue: 0.0%" in every.description
    assert min_accuracy(0.0, "all").passed


def test_min_accuracy_fails_on_error_runs_unless_errors_are_allowed(small_suite, instance):
    analyst = small_suite.analyst

    def provider_down_for_total_revenue(request, index):
        if analyst.case_of(request) == "total_revenue":
            return error(400, "the provider refused the request")  # never retried
        return analyst(request, index)

    small_suite.agent.set_script(provider_down_for_total_revenue)
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0], assets=["agent_runs", "grades"])

    def min_accuracy(**options: object) -> dg.AssetCheckEvaluation:
        small_suite.write_config(min_accuracy=0.5, **options)
        return checks(evaluate(defs, instance, MODELS[0], assets=["model_summaries"]))[
            "min_accuracy"
        ]

    # 3 of 4 tests pass, above the minimum: the error alone fails the check, as it makes
    # `eval-pipeline test` exit 3.
    broken = min_accuracy()
    assert not broken.passed
    assert broken.description == (
        f"{MODELS[0]} on {DAY}: 1 run(s) ended in an error: total_revenue; the evaluation is "
        "incomplete whatever its accuracy (75.0%), since errors are not allowed "
        "(test.allow_errors) (3/4 runs passed)"
    )
    assert broken.metadata["errors"].value == 1
    allowed = min_accuracy(allow_errors=True)
    assert allowed.passed
    assert "counted as not passed" in allowed.description


def test_min_accuracy_without_a_minimum_is_skipped_not_passed(small_suite, instance):
    defs = prepare(small_suite, instance)
    result = evaluate(defs, instance, MODELS[0])
    assert set(checks(result)) == {"no_regression"}  # min_accuracy has no result: skipped
    summary = metadata(result, "model_summaries")
    assert summary["pass_rate"] == 100.0 and summary["pass_rate_ci95"][1] == 100.0


def test_no_regression_names_the_case_that_passed_yesterday_and_fails_today(small_suite, instance):
    defs = prepare(small_suite, instance, DAY, NEXT_DAY)
    first = checks(evaluate(defs, instance, MODELS[0], DAY))["no_regression"]
    assert first.passed
    assert first.description == f"{MODELS[0]} on {DAY}: no earlier evaluated day to compare with"
    assert first.metadata["previous_day"].value == "none"

    small_suite.analyst.sql["orders_by_region"] = WRONG_SQL["orders_by_region"]
    second = checks(evaluate(defs, instance, MODELS[0], NEXT_DAY))["no_regression"]
    assert not second.passed
    assert (
        second.description == f"{MODELS[0]} on {NEXT_DAY}: regressed since {DAY}: orders_by_region"
    )
    assert second.partition == model_day_key(MODELS[0], NEXT_DAY)
    assert second.metadata["regressed"].value == ["orders_by_region"]

    # the other model has no regression: its previous day is missing, not failing
    assert checks(evaluate(defs, instance, MODELS[1], NEXT_DAY))["no_regression"].passed


def test_daily_evaluation_starts_the_day_with_its_inputs_run(small_suite, tmp_path):
    defs = small_suite.definitions()
    schedule = defs.resolve_schedule_def("daily_evaluation")
    assert schedule.cron_schedule == "0 6 * * *"
    home = tmp_path / "dagster_home"
    home.mkdir()
    # a schedule context needs a persistent instance (it reopens it from its reference), and
    # the repository to resolve partitioned run requests against
    with (
        dg.DagsterInstance.local_temp(str(home)) as instance,
        dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 6, 1, 6, 0, tzinfo=UTC),
            repository_def=defs.get_repository_def(),
        ) as context,
    ):
        requests = schedule.evaluate_tick(context).run_requests
    # One run a day: the models' runs follow it (pipeline/test_daily_chain.py).
    assert [(r.partition_key, r.run_key) for r in requests] == [("2026-06-01", "inputs-2026-06-01")]
    job = defs.resolve_job_def(schedule.job_name)
    assert job.name == "day_inputs"
    assert dg.AssetKey("reference_results") in job.asset_layer.selected_asset_keys


def test_the_sensor_adds_missing_models_and_never_deletes_one(small_suite):
    sensor = small_suite.definitions().resolve_sensor_def("sync_model_partitions")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", [MODELS[0], "openai:retired"])
        with dg.build_sensor_context(instance=instance) as context:
            result = sensor.evaluate_tick(context)
        (request,) = result.dynamic_partitions_requests
        assert isinstance(request, dg.AddDynamicPartitionsRequest)
        assert (request.partitions_def_name, list(request.partition_keys)) == (
            "models",
            [MODELS[1]],
        )

        instance.add_dynamic_partitions("models", list(request.partition_keys))
        with dg.build_sensor_context(instance=instance) as context:
            again = sensor.evaluate_tick(context)
        assert not again.dynamic_partitions_requests
        assert again.skip_message == "every configured model has its partition"
        assert set(instance.get_dynamic_partitions("models")) == {*MODELS, "openai:retired"}


def test_a_bad_model_id_in_the_config_stops_the_sensor_and_the_schedule_as_the_cli_says_it(
    small_suite, tmp_path
):
    small_suite.write_config(models=[MODELS[0], "nope:gpt-x"])
    defs = small_suite.definitions()
    expected = (
        "eval_config.yaml: test.models: 'nope:gpt-x': provider 'nope' is not under "
        "llm.providers; configured: openai, judge, anthropic"
    )
    sensor = defs.resolve_sensor_def("sync_model_partitions")
    schedule = defs.resolve_schedule_def("daily_evaluation")
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        with (
            dg.build_sensor_context(instance=instance) as context,
            pytest.raises(Exception, match=expected) as caught,
        ):
            sensor.evaluate_tick(context)
        with (
            dg.build_schedule_context(
                instance=instance,
                scheduled_execution_time=datetime(2026, 6, 1, 6, tzinfo=UTC),
                repository_def=defs.get_repository_def(),
            ) as context,
            pytest.raises(dg.DagsterUserCodeExecutionError) as wrapped,
        ):
            schedule.evaluate_tick(context)
        # Dagster wraps a schedule's error; the UI shows the one it wraps
        assert expected in str(wrapped.value.user_exception)
        # nothing was added for the good model either: the config is fixed first, as the CLI asks
        assert instance.get_dynamic_partitions("models") == []
    assert "unknown model(s); nothing was run" in str(caught.value)


@pytest.mark.slow
def test_the_leaderboard_ranks_the_models_and_marks_a_difference_that_is_not_real(
    small_suite, instance
):
    defs = prepare(small_suite, instance)
    small_suite.analyst.sql["total_revenue"] = WRONG_SQL["total_revenue"]
    evaluate(defs, instance, MODELS[0])
    small_suite.analyst.sql["total_revenue"] = RIGHT_SQL["total_revenue"]
    evaluate(defs, instance, MODELS[1])

    result = materialize(defs, ["leaderboard"], partition_key=DAY, instance=instance)
    assert result.success
    values = metadata(result, "leaderboard")
    # One test apart: better ranked, but the paired test cannot tell them apart.
    assert values["ranking"] == [MODELS[1], MODELS[0]]
    assert values["ties_not_significant"] == [[MODELS[1], MODELS[0]]]
    assert values["detectable_difference"].startswith("with ")
    assert f"tie with {MODELS[0]} (p_adj 1.000)" in values["leaderboard"]
    assert "Is the difference real?" in values["leaderboard"]

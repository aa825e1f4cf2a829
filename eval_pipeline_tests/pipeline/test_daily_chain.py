"""The daily schedule runs a day as `eval-pipeline test` does, in the named jobs: the day's inputs,
one run per model (runs → grades → summary), then one report run; automation adds nothing.

The schedule and the sensors are evaluated as the daemon evaluates them, and what they request
is executed in this process against the same SQLite instance, with the tags the daemon's run
would carry.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline_tests.pipeline.automation import drive
from eval_pipeline_tests.pipeline.small_suite import DAY, EVALUATION, MODELS, metadata, prepare

pytestmark = pytest.mark.slow  # Dagster runs in a SQLite instance


def launch(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    job: str,
    request: dg.RunRequest,
    **daemon_tags: str,
) -> dg.ExecuteInProcessResult:
    """Execute a run request of a schedule or sensor as the daemon's run would."""
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        tags={**request.tags, **daemon_tags},
        raise_on_error=False,
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return result


def after_success(defs, instance, sensor: str, result: dg.ExecuteInProcessResult):
    """What a run status sensor requests once the run of `result` succeeded."""
    run = instance.get_run_by_id(result.run_id)
    (event,) = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)
    context = dg.build_run_status_sensor_context(
        sensor_name=sensor,
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=event.dagster_event,
    )
    requested = defs.resolve_sensor_def(sensor)(context)
    return list(requested) if not isinstance(requested, dg.SkipReason) else requested


def report_tick(defs, instance) -> list[dg.RunRequest]:
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        return list(
            defs.resolve_sensor_def("report_after_evaluations").evaluate_tick(context).run_requests
        )


def materialized_by(result: dg.ExecuteInProcessResult) -> set[tuple[str, str]]:
    return {
        (event.asset_key.to_user_string(), str(event.partition))
        for event in result.get_asset_materialization_events()
    }


def test_the_daily_schedule_evaluates_each_model_in_one_run_then_reports_once(
    small_suite, tmp_path
):
    small_suite.write_config(models=[*MODELS, "openai:gpt-new"])  # no partition yet: skipped
    defs = small_suite.definitions()
    schedule = defs.resolve_schedule_def("daily_evaluation")
    assert schedule.job_name == "day_inputs"
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        with dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 6, 1, 6, tzinfo=UTC),
            repository_def=defs.get_repository_def(),
        ) as context:
            (request,) = schedule.evaluate_tick(context).run_requests
        assert (request.partition_key, request.run_key) == (DAY, f"inputs-{DAY}")
        inputs = launch(
            defs, instance, "day_inputs", request, **{"dagster/schedule_name": "daily_evaluation"}
        )

        # One run per model, each its whole partition: runs, grades and summary.
        requests = after_success(defs, instance, "evaluate_after_inputs", inputs)
        assert sorted(str(r.partition_key) for r in requests) == sorted(
            str(model_day_key(m, DAY)) for m in MODELS
        )
        # deploy/dagster.yaml limits the runs in flight per provider by this tag
        assert {r.tags["eval_pipeline/provider"] for r in requests} == {"openai"}
        assert report_tick(defs, instance) == []  # no model's run has finished yet

        first = launch(defs, instance, "evaluate_model_day", requests[0])
        assert materialized_by(first) == {
            (asset, str(requests[0].partition_key)) for asset in EVALUATION
        }
        assert report_tick(defs, instance) == []  # the other model's run is still to come
        launch(defs, instance, "evaluate_model_day", requests[1])

        # Then the day's leaderboard and report, in one run, requested once for the day.
        (report,) = report_tick(defs, instance)
        assert report.partition_key == DAY
        assert report_tick(defs, instance)[0].run_key == report.run_key  # the daemon dedupes it
        reported = launch(defs, instance, "day_report", report)
        assert materialized_by(reported) == {("leaderboard", DAY), ("report", DAY)}

        # Automation sees the schedule's day done, as it sees the command line's.
        _, ticks = drive(defs, instance)
        assert ticks == []
        runs = instance.get_runs()
        assert len(runs) == 4  # inputs, two models, report
        assert {r.tags["eval_pipeline/source"] for r in runs} == {"schedule"}


def test_a_day_inputs_run_from_the_ui_evaluates_nothing_by_itself(small_suite, tmp_path):
    defs = small_suite.definitions()
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        inputs = launch(defs, instance, "day_inputs", dg.RunRequest(partition_key=DAY))
        skipped = after_success(defs, instance, "evaluate_after_inputs", inputs)
        assert isinstance(skipped, dg.SkipReason)
        assert "not launched by the schedule" in skipped.skip_message


def test_a_run_launched_with_the_partition_tag_alone_evaluates_that_partition(
    small_suite, instance
):
    # What a script's GraphQL launch sends: "date|model", without Dagster's dimension tags.
    defs = prepare(small_suite, instance)
    partition = str(model_day_key(MODELS[1], DAY))
    result = defs.resolve_job_def("evaluate_model_day").execute_in_process(
        instance=instance, tags={"dagster/partition": partition}, raise_on_error=False
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert materialized_by(result) == {(asset, partition) for asset in EVALUATION}
    assert metadata(result, "grades")["passed"] + metadata(result, "grades")["failed"] == 4

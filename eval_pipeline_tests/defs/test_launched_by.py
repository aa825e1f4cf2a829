"""Every run says what launched it: the `tag_run_launcher` sensor on runs in a real instance."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.defs.launched import (
    EVALUATE_NEW_TAG,
    LAUNCHED_BY_TAG,
    asks_for_new_evaluations,
    build_tag_run_launcher,
    launched_by,
)


@dg.asset
def one() -> None:
    return None


@dg.asset
def theirs() -> None:
    return None


JOB = dg.define_asset_job("one_job", selection=[one], run_tags={LAUNCHED_BY_TAG: "ui"})
# A team's own job in the same code location: not the suite's, so never tagged.
FOREIGN = dg.define_asset_job("their_job", selection=[theirs])
DEFS = dg.Definitions(assets=[one, theirs], jobs=[JOB, FOREIGN])
tag_run_launcher = build_tag_run_launcher("tag_run_launcher", jobs=["one_job"], assets=[one.key])


def _started(instance: dg.DagsterInstance, job: str, **options) -> dg.RunStatusSensorContext:
    result = DEFS.resolve_job_def(job).execute_in_process(instance=instance, **options)
    run = instance.get_run_by_id(result.run_id)
    started = next(
        e.dagster_event
        for e in instance.all_logs(run.run_id)
        if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_START"
    )
    return dg.build_run_status_sensor_context(
        sensor_name="tag_run_launcher",
        dagster_instance=instance,
        dagster_run=run,
        dagster_event=started,
    )


LAUNCHES = [
    ({"dagster/backfill": "abcd"}, "backfill"),  # the job's own "ui" is wrong here
    ({"dagster/schedule_name": "daily_evaluation"}, "schedule"),
    ({"dagster/from_automation_condition": "true"}, "automation"),
    ({LAUNCHED_BY_TAG: "cli"}, "cli"),
    ({}, "ui"),
]


@pytest.mark.parametrize(("tags", "expected"), LAUNCHES)
def test_what_launched_a_run_is_read_from_its_tags(tags, expected):
    # A run of the suite's job, which carries its own "ui", with what its launcher added.
    assert launched_by({LAUNCHED_BY_TAG: "ui", **tags}) == expected


@pytest.mark.slow  # runs Dagster
@pytest.mark.parametrize(("tags", "expected"), LAUNCHES)
def test_a_started_run_is_tagged_with_what_launched_it(tags, expected):
    with dg.DagsterInstance.ephemeral() as instance:
        context = _started(instance, "one_job", tags=tags)
        run = context.dagster_run
        tag_run_launcher(context)
        assert instance.get_run_by_id(run.run_id).tags[LAUNCHED_BY_TAG] == expected
        assert launched_by(instance.get_run_by_id(run.run_id).tags) == expected  # stable


@pytest.mark.slow  # runs Dagster
def test_a_run_of_another_job_in_the_code_location_is_left_untagged():
    with dg.DagsterInstance.ephemeral() as instance:
        context = _started(instance, "their_job")
        tag_run_launcher(context)
        assert LAUNCHED_BY_TAG not in instance.get_run_by_id(context.dagster_run.run_id).tags


@pytest.mark.parametrize(
    ("job", "tags", "asks"),
    [
        # "Materialize…" / "Materialize unsynced" from the asset graph, a backfill of assets,
        # automation: never a new (model, day) by themselves
        ("__ASSET_JOB", {"dagster/from_ui": "true"}, False),
        ("__ASSET_JOB", {"dagster/backfill": "abcd", "dagster/from_ui": "true"}, False),
        ("__ASSET_JOB", {"dagster/from_automation_condition": "true"}, False),
        # ... unless the launch asks with the tag
        ("__ASSET_JOB", {"dagster/from_ui": "true", EVALUATE_NEW_TAG: "true"}, True),
        # the named job (its page, a backfill of it, the schedule's chain), and a script
        ("evaluate_model_day", {"dagster/from_ui": "true"}, True),
        ("evaluate_model_day", {"dagster/backfill": "abcd"}, True),
        ("__ASSET_JOB", {}, True),
    ],
)
def test_only_a_launch_that_asks_evaluates_a_new_model_day(job, tags, asks):
    run = dg.DagsterRun(job_name=job, tags=tags)
    assert asks_for_new_evaluations(run) is asks

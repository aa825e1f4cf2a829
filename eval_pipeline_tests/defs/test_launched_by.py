"""Every run says what launched it: the `tag_run_launcher` sensor on runs in a real instance."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.defs.launched import LAUNCHED_BY_TAG, launched_by, tag_run_launcher


@dg.asset
def one() -> None:
    return None


JOB = dg.define_asset_job("one_job", selection=[one], run_tags={LAUNCHED_BY_TAG: "ui"})
DEFS = dg.Definitions(assets=[one], jobs=[JOB])


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({"dagster/backfill": "abcd"}, "backfill"),  # the job's own "ui" is wrong here
        ({"dagster/schedule_name": "daily_evaluation"}, "schedule"),
        ({"dagster/from_automation_condition": "true"}, "automation"),
        ({LAUNCHED_BY_TAG: "cli"}, "cli"),
        ({}, "ui"),
    ],
)
def test_a_started_run_is_tagged_with_what_launched_it(tags, expected):
    with dg.DagsterInstance.ephemeral() as instance:
        result = DEFS.resolve_job_def("one_job").execute_in_process(instance=instance, tags=tags)
        run = instance.get_run_by_id(result.run_id)
        started = next(
            e.dagster_event
            for e in instance.all_logs(run.run_id)
            if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_START"
        )
        context = dg.build_run_status_sensor_context(
            sensor_name="tag_run_launcher",
            dagster_instance=instance,
            dagster_run=run,
            dagster_event=started,
        )
        tag_run_launcher(context)
        assert instance.get_run_by_id(run.run_id).tags[LAUNCHED_BY_TAG] == expected
        assert launched_by(instance.get_run_by_id(run.run_id).tags) == expected  # stable

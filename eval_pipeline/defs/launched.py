"""Who launched a run (cli, schedule, ui, backfill, automation): one tag on every run of the suite."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

LAUNCHED_BY_TAG = "eval_pipeline/source"
CLI, SCHEDULE, UI, BACKFILL, AUTOMATION = "cli", "schedule", "ui", "backfill", "automation"


def launched_by(tags: Mapping[str, str]) -> str:
    """What launched a run with these tags: our own tag when the launcher set it (the CLI, a
    schedule), else what Dagster's tags say (a backfill, a sensor), else the UI."""
    if "dagster/backfill" in tags:
        return BACKFILL  # before our tag: a backfill of a named job carries the job's "ui"
    own = tags.get(LAUNCHED_BY_TAG)
    if own in (CLI, SCHEDULE):
        return own
    if "dagster/schedule_name" in tags:
        return SCHEDULE
    if any(
        key in tags
        for key in (
            "dagster/sensor_name",
            "dagster/from_automation_condition",
            "dagster/auto_materialize",
        )
    ):
        return AUTOMATION
    return own or UI


@dg.run_status_sensor(
    name="tag_run_launcher",
    run_status=dg.DagsterRunStatus.STARTED,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Tags every started run with {LAUNCHED_BY_TAG} = cli, schedule, ui, backfill "
    "or automation, so the runs list can be filtered by what launched them.",
)
def tag_run_launcher(context: dg.RunStatusSensorContext) -> None:
    run = context.dagster_run
    source = launched_by(run.tags)
    if run.tags.get(LAUNCHED_BY_TAG) != source:
        context.instance.add_run_tags(run.run_id, {LAUNCHED_BY_TAG: source})

"""Who launched a run (cli, schedule, ui, backfill, automation): one tag on every run of the suite."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import dagster as dg

LAUNCHED_BY_TAG = "eval_pipeline/source"
CLI, SCHEDULE, UI, BACKFILL, AUTOMATION = "cli", "schedule", "ui", "backfill", "automation"
ASSET_JOB_PREFIX = "__ASSET_JOB"
#: The opt-in of a run or backfill of the asset graph to evaluate (model, day) partitions that
#: were never evaluated (`asks_for_new_evaluations`): "Add tags" in the UI's launch dialog.
EVALUATE_NEW_TAG = "eval_pipeline/evaluate_new"
# What Dagster tags a run with when the UI launched it (and a backfill the UI launched), a
# backfill, a sensor or the automation did.
_LAUNCHED_BY_DAGSTER = (
    "dagster/from_ui",
    "dagster/backfill",
    "dagster/sensor_name",
    "dagster/from_automation_condition",
    "dagster/auto_materialize",
)


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


def asks_for_new_evaluations(run: dg.DagsterRun) -> bool:
    """Whether a run may evaluate a (model, day) that was never evaluated, which calls the
    model under test for every test: a run of a named job (`evaluate_model_day`: its page, a
    backfill of it, the daily schedule's chain), a run started by a script or test in its own
    process, or one tagged `EVALUATE_NEW_TAG` = true. A run of the asset graph's implicit job
    launched from the UI, by a backfill or by a sensor ("Materialize…", "Materialize
    unsynced", a backfill of assets, automation) may not: "Materialize unsynced" selects
    every partition of what it materializes, evaluated or not."""
    if not run.job_name.startswith(ASSET_JOB_PREFIX):
        return True
    if run.tags.get(EVALUATE_NEW_TAG, "").lower() == "true":
        return True
    return not any(tag in run.tags for tag in _LAUNCHED_BY_DAGSTER)


def launched_alone_from_ui(run: dg.DagsterRun, key: dg.AssetKey) -> bool:
    """Whether a run of the asset graph materializes `key` alone, one partition, launched
    from the UI ("Materialize…" on the asset's page or in the lineage), not by a backfill."""
    return (
        run.job_name.startswith(ASSET_JOB_PREFIX)
        and run.tags.get("dagster/from_ui") == "true"
        and "dagster/backfill" not in run.tags
        and run.asset_selection == frozenset({key})
    )


def build_tag_run_launcher(
    name: str, *, jobs: Collection[str], assets: Collection[dg.AssetKey]
) -> dg.RunStatusSensorDefinition:
    """`tag_run_launcher` (named `name`): tags the runs of the suite's own `jobs`, and the
    asset runs (the UI's graph, the automation, the watch sensor) materializing only the
    suite's `assets`; a run of any other job in the code location (a team's own, another
    suite's) is left as it is."""
    own_jobs, own_assets = frozenset(jobs), frozenset(assets)

    @dg.run_status_sensor(
        name=name,
        run_status=dg.DagsterRunStatus.STARTED,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Tags every started run of the suite with {LAUNCHED_BY_TAG} = cli, "
        "schedule, ui, backfill or automation, so the runs list can be filtered by what "
        "launched them.",
    )
    def tag_run_launcher(context: dg.RunStatusSensorContext) -> None:
        run = context.dagster_run
        if not _own_run(run, own_jobs, own_assets):
            return
        source = launched_by(run.tags)
        if run.tags.get(LAUNCHED_BY_TAG) != source:
            context.instance.add_run_tags(run.run_id, {LAUNCHED_BY_TAG: source})

    return tag_run_launcher


def _own_run(run: dg.DagsterRun, jobs: frozenset[str], assets: frozenset[dg.AssetKey]) -> bool:
    if run.job_name in jobs:
        return True
    # A run of assets picked in the UI or by a sensor runs Dagster's implicit asset job
    # (`__ASSET_JOB…`), shared by every asset of the code location: its selection decides.
    selection = run.asset_selection
    return run.job_name.startswith(ASSET_JOB_PREFIX) and bool(selection) and selection <= assets

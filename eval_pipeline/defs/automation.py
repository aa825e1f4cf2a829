"""The daily schedules, the sensor keeping model partitions in sync, and the automation that chains the rest."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.agents import require_models
from eval_pipeline.defs.chain import SCHEDULE_NAME, evaluate_after_inputs, report_after_evaluations
from eval_pipeline.defs.conditions import automation_sensor
from eval_pipeline.defs.launched import LAUNCHED_BY_TAG, SCHEDULE
from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.defs.watch import build_watch_sensor
from eval_pipeline.suite import CONFIG_FILE, Problem, SuiteError, load_config

if TYPE_CHECKING:
    from eval_pipeline.defs.assets.suite import SuiteAssets
    from eval_pipeline.defs.chain import Job

RUNNING = dg.DefaultScheduleStatus.RUNNING
# The daily evaluation calls the models under test, which costs money: it starts stopped, as
# Dagster's schedules do, and a person turns it on in the UI (the instance remembers). What
# only reads or tidies the suite's own files starts running.
STOPPED = dg.DefaultScheduleStatus.STOPPED
HISTORY_CRON = "0 23 * * *"  # after the day's evaluations, before the 03:00 compaction


def _check_cron(cron: str) -> None:
    """Refuse a bad `test.schedule` as a configuration mistake, not a definitions crash."""
    try:
        # Dagster's own cron parser decides (it is the one that runs the schedule).
        dg.ScheduleDefinition(name="schedule_check", cron_schedule=cron, job_name="schedule_check")
    except dg.DagsterInvalidDefinitionError:
        raise SuiteError(
            [
                Problem(
                    CONFIG_FILE,
                    "test.schedule",
                    f"{cron!r} is not a cron expression; expected 5 fields, e.g. '0 6 * * *'",
                )
            ],
            headline=f"a problem in {CONFIG_FILE}; nothing was run",
        ) from None


def build_automation(
    suite_root: str,
    cron: str,
    *,
    inputs: SuiteAssets,
    suite_job: Job,
    inputs_job: Job,
    evaluate_job: Job,
    report_job: Job,
    history_job: Job,
    own_assets: dg.AssetSelection,
    names: SuiteNames = UNNAMED,
) -> tuple[list[dg.ScheduleDefinition], list[dg.SensorDefinition]]:
    """`daily_evaluation` starts today's evaluation as the command line runs it, in the
    named jobs (`chain`): the day's inputs, one run per configured model, the report.
    What other runs materialize (a backfill, the UI) is carried on by declarative
    automation as their inputs land (`conditions`). `watch_suite_files` re-reads the test
    files and context when they change on disk. `sync_model_partitions` adds configured
    models to the `models` partitions and never removes one, so history stays reachable."""

    _check_cron(cron)

    def configured_models() -> list[str]:
        # The command line's check of model ids: a bad one fails the tick, naming it and
        # what is configured, instead of each of its runs failing later.
        config = load_config(SuiteResource(root=suite_root).path)
        models = list(config.test.models)
        require_models(config, models, source=CONFIG_FILE, field="test.models")
        return models

    @dg.schedule(
        name=names.scoped(SCHEDULE_NAME),
        cron_schedule=cron,
        job=inputs_job,
        default_status=STOPPED,
        description=f"Evaluate today for every configured model: {inputs_job.name}, then "
        f"{evaluate_job.name} per model (evaluate_after_inputs), then {report_job.name} "
        "(report_after_evaluations).",
    )
    def daily_evaluation(context: dg.ScheduleEvaluationContext):
        moment = context.scheduled_execution_time or datetime.now(UTC)
        day = moment.date().isoformat()
        configured_models()  # a bad model id fails the tick, before anything runs
        return dg.RunRequest(
            run_key=f"inputs-{day}",
            partition_key=day,
            tags={LAUNCHED_BY_TAG: SCHEDULE},
        )

    # Declarative automation cannot chain these (an unpartitioned child of Dynamic×Daily
    # parents always sees missing parent partitions), so they have a schedule of their own.
    daily_history_marts = dg.ScheduleDefinition(
        name=names.scoped("daily_history_marts"),
        cron_schedule=HISTORY_CRON,
        job=history_job,
        default_status=RUNNING,
        description="Rebuild the history marts (trend, flaky cases, regressions) each evening.",
    )

    @dg.sensor(
        name=names.scoped("sync_model_partitions"),
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Adds the models of eval_config.yaml to the `models` partitions (never deletes).",
    )
    def sync_model_partitions(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        known = set(context.instance.get_dynamic_partitions(names.models_partitions.name))
        missing = [m for m in configured_models() if m not in known]
        if not missing:
            return dg.SensorResult(skip_reason="every configured model has its partition")
        return dg.SensorResult(
            dynamic_partitions_requests=[names.models_partitions.build_add_request(missing)]
        )

    watch = build_watch_sensor(
        suite_root,
        name=names.scoped("watch_suite_files"),
        inputs=inputs,
        job=suite_job,
        names=names,
    )
    return [daily_evaluation, daily_history_marts], [
        sync_model_partitions,
        evaluate_after_inputs(inputs_job, evaluate_job, configured_models, names),
        report_after_evaluations(inputs_job, evaluate_job, report_job, names),
        watch,
        automation_sensor(names.scoped("evaluation_automation"), own_assets),
    ]

"""The daily evaluation as the command line runs it, in named jobs: the day's inputs, then one run per model (runs → grades → summary), then the day's report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs.launched import LAUNCHED_BY_TAG, SCHEDULE
from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.defs.partitions import model_day_key

if TYPE_CHECKING:  # what dg.define_asset_job returns has no public name; annotations only
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition as Job,
    )

PROVIDER_TAG = "eval_pipeline/provider"
# The day_inputs run a model's run or a report follows: the chain of one scheduled day.
CHAIN_TAG = "eval_pipeline/chain"
# How many model runs the chain launched: its report waits for every one of them.
CHAIN_SIZE_TAG = "eval_pipeline/chain_runs"
PARTITION_TAG = "dagster/partition"
SCHEDULE_NAME = "daily_evaluation"
# A chain is looked at while its day_inputs run is this recent: a day's evaluation ends
# within hours, and the query stays small however long the history is.
CHAIN_WINDOW = timedelta(days=2)


def chain_tags(inputs_run_id: str) -> dict[str, str]:
    return {LAUNCHED_BY_TAG: SCHEDULE, CHAIN_TAG: inputs_run_id}


def evaluate_after_inputs(
    inputs_job: Job,
    evaluate_job: Job,
    configured_models: Callable[[], list[str]],
    names: SuiteNames = UNNAMED,
) -> dg.SensorDefinition:
    """Once the schedule's `day_inputs` run of a day succeeds, one `evaluate_model_day` run
    per configured model of that day: each runs, grades and summarizes its partition in one
    run worker, as `eval-pipeline test` does, instead of a run per asset."""

    @dg.run_status_sensor(
        name=names.scoped("evaluate_after_inputs"),
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[inputs_job],
        request_job=evaluate_job,
        minimum_interval_seconds=10,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"After the {SCHEDULE_NAME} schedule's {inputs_job.name} run of a day, "
        f"launches {evaluate_job.name} for each configured model of that day.",
    )
    def sensor(context: dg.RunStatusSensorContext):
        run = context.dagster_run
        if run.tags.get("dagster/schedule_name") != names.scoped(SCHEDULE_NAME):
            return dg.SkipReason(f"run {run.run_id} was not launched by the schedule")
        day = run.tags[PARTITION_TAG]
        known = set(context.instance.get_dynamic_partitions(names.models_partitions.name))
        models = []
        for model in configured_models():
            if model in known:
                models.append(model)
            else:
                context.log.warning(
                    f"model {model} has no partition yet; the sync_model_partitions sensor adds it"
                )
        if not models:
            return dg.SkipReason(f"no configured model has a partition on {day}")
        tags = {**chain_tags(run.run_id), CHAIN_SIZE_TAG: str(len(models))}
        return [
            dg.RunRequest(
                run_key=f"evaluate-{model}-{day}-{run.run_id}",
                partition_key=model_day_key(model, day),
                # deploy/dagster.yaml limits the runs in flight per provider with this tag,
                # so a provider's rate limit holds across runs and machines.
                tags={**tags, PROVIDER_TAG: model.split(":", 1)[0]},
            )
            for model in models
        ]

    return sensor


def _chains(
    instance: dg.DagsterInstance, inputs_job: Job, schedule: str
) -> Sequence[dg.DagsterRun]:
    since = datetime.now(UTC) - CHAIN_WINDOW
    return instance.get_runs(
        dg.RunsFilter(
            job_name=inputs_job.name,
            statuses=[dg.DagsterRunStatus.SUCCESS],
            tags={"dagster/schedule_name": schedule},
            created_after=since,
        ),
        limit=20,
    )


def report_after_evaluations(
    inputs_job: Job, evaluate_job: Job, report_job: Job, names: SuiteNames = UNNAMED
) -> dg.SensorDefinition:
    """The day's leaderboard and report, in one `day_report` run, once every model's run of
    a scheduled day has finished and one of them succeeded (a model that failed is named by
    its own run; the others still get their report)."""

    @dg.sensor(
        name=names.scoped("report_after_evaluations"),
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job=report_job,
        description=f"Launches {report_job.name} for a scheduled day once all of its "
        f"{evaluate_job.name} runs have finished.",
    )
    def sensor(context: dg.SensorEvaluationContext):
        requests = []
        for inputs in _chains(context.instance, inputs_job, names.scoped(SCHEDULE_NAME)):
            runs = context.instance.get_runs(
                dg.RunsFilter(job_name=evaluate_job.name, tags={CHAIN_TAG: inputs.run_id})
            )
            expected = int(runs[0].tags.get(CHAIN_SIZE_TAG, len(runs))) if runs else 0
            if not runs or len(runs) < expected or not all(run.is_finished for run in runs):
                continue
            if not any(run.status is dg.DagsterRunStatus.SUCCESS for run in runs):
                continue
            requests.append(
                dg.RunRequest(
                    run_key=f"report-{inputs.run_id}",  # once per chain, whatever the ticks
                    partition_key=inputs.tags[PARTITION_TAG],
                    tags=chain_tags(inputs.run_id),
                )
            )
        return requests or dg.SkipReason("no scheduled day is waiting for its report")

    return sensor

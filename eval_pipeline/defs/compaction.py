"""The daily compaction of the result store: a job of one op, and its schedule."""

import dagster as dg

from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.store import compact_store

JOB = "compact_store"
CRON = "0 3 * * *"  # daily, in the quiet hours before the default 06:00 evaluation
POOL = "duckdb_results"  # one compaction at a time


def build_compaction(names: SuiteNames) -> tuple[dg.JobDefinition, dg.ScheduleDefinition]:
    """`compact_store`, the job folding the store's small files, and its nightly schedule."""

    @dg.op(
        name=names.scoped("compact_results"),
        pool=POOL,
        required_resource_keys={names.resource(SUITE_KEY)},
        description="Fold the files written over ten minutes ago into segments.",
    )
    def compact_results(context: dg.OpExecutionContext) -> None:
        report = compact_store(suite_of(context, names).store())
        if report.status == "busy":  # another compaction runs: nothing changed, try later
            context.log.warning(report.message)
            raise dg.RetryRequested(max_retries=6, seconds_to_wait=600)
        context.log.info(report.message)

    @dg.job(
        name=names.scoped(JOB),
        description="Compact the result store, so SQL over months of history opens a few files.",
    )
    def compact_store_job() -> None:
        compact_results()

    schedule = dg.ScheduleDefinition(
        name=names.scoped(JOB),
        cron_schedule=CRON,
        job=compact_store_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Compact the result store every night.",
    )
    return compact_store_job, schedule

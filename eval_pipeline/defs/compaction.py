"""The daily compaction of the result store: a job of one op, and its schedule."""

import dagster as dg

from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.store import compact_store

JOB = "compact_store"
CRON = "0 3 * * *"  # daily, in the quiet hours before the default 06:00 evaluation
POOL = "duckdb_results"  # one compaction at a time


@dg.op(pool=POOL, description="Fold the files written over ten minutes ago into segments.")
def compact_results(context: dg.OpExecutionContext, suite: SuiteResource) -> None:
    report = compact_store(suite.store())
    if report.status == "busy":  # another compaction runs: nothing changed, try later
        context.log.warning(report.message)
        raise dg.RetryRequested(max_retries=6, seconds_to_wait=600)
    context.log.info(report.message)


@dg.job(
    name=JOB,
    description="Compact the result store, so SQL over months of history opens a few files.",
)
def compact_store_job() -> None:
    compact_results()


compact_store_schedule = dg.ScheduleDefinition(
    name=JOB,
    cron_schedule=CRON,
    job=compact_store_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Compact the result store every night.",
)

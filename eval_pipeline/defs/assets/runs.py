"""The agent runs of a (model, day) partition: what changed runs, the rest is reused."""

from collections.abc import Iterator, Sequence
from datetime import date

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import groups
from eval_pipeline.defs.launched import (
    EVALUATE_NEW_TAG,
    LAUNCHED_BY_TAG,
    UI,
    asks_for_new_evaluations,
    launched_alone_from_ui,
)
from eval_pipeline.defs.metadata import as_metadata, model_and_day, recorded, table_definition
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.reporting import EVALUATION_TAG, Latest, partition_of, report_stage
from eval_pipeline.defs.resources import SUITE_KEY, SuiteResource, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import stages, stages_of


class AgentRunsConfig(dg.Config):
    """Launchpad options of a runs materialization."""

    select: list[str] = Field(default_factory=list, description="test names, file stems or folders")
    no_cache: bool = False
    #: Record the LLM completions (`--record`). Named `record`, not `recording`: a config
    #: field's name is a run config key that launchpad YAML may use, a contract.
    record: bool = False
    k: int | None = None
    attempts: dict[str, int] = Field(
        default_factory=dict,
        description="test name → attempts where an attempt budget gives a test more than k",
    )
    threads: int | None = None
    budget_round: int = Field(
        default=0,
        description="which round of an attempt budget this is (`eval-pipeline test --budget`); "
        "0: none, and the day's stored budget no longer describes its runs",
    )


def agent_runs_asset(
    graph: StageGraph, warehouse_keys: Sequence[dg.AssetKey]
) -> dg.AssetsDefinition:
    """`agent_runs`, per model and day, reading the dbt models `warehouse_keys`."""
    names = graph.names

    @dg.asset(
        key=graph.key("agent_runs"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("agent_runs"),
        deps=graph.deps("agent_runs", *warehouse_keys),
        kinds={"duckdb", "python"},
        metadata=table_definition("agent_runs"),
        description="Every agent run of the model on the day. Completed runs whose key (test, "
        "its input, model, context, attempt, day) is unchanged are reused, never re-run.",
    )
    def agent_runs(
        context: dg.AssetExecutionContext, config: AgentRunsConfig
    ) -> Iterator[dg.MaterializeResult]:
        suite = suite_of(context, names)
        model, day = model_and_day(context)
        _refuse_unasked_new_partition(context, model, day, names)
        options = stages.RunOptions(
            select=config.select,
            no_cache=config.no_cache,
            recording=config.record,
            k=config.k,
            attempts=config.attempts,
            threads=config.threads,
            budget_round=config.budget_round,
        )
        done = stages.agent_runs(
            suite.load(), model, day, suite.store(), suite.agent_context(), options
        )
        # Yielded first: the materialization is in the instance before the chain reads it.
        yield recorded(context, done)
        if launched_alone_from_ui(context.run, context.asset_key):
            _finish_the_chain(context, graph, suite, model, day)

    return agent_runs


def _finish_the_chain(
    context: dg.AssetExecutionContext,
    graph: StageGraph,
    suite: SuiteResource,
    model: str,
    day: date,
) -> None:
    """What `evaluate_model_day` and `day_report` do after the runs, done by this step and
    reported as the command line reports its work: launched alone from its asset page
    ("Materialize…" on one partition, which launches only the asset shown), the runs step
    would otherwise leave the grades, the summary and the day's report to two more runs of
    the automation. One launch, one run; automation finds nothing left to do."""
    layout = suite.store()
    # The stages after the runs, with the grades' launchpad defaults (no rejudging).
    work = {
        **stages.model_work(suite.load, model, day, layout, suite.agent_context()),
        **stages.report_work(layout, day),
    }
    assets = context.repository_def.asset_graph
    latest = Latest(context.instance, assets)
    for declared in (*stages_of("model"), *stages_of("report")):
        if declared.asset not in work:
            continue  # the runs, just materialized
        done = work[declared.asset]()
        for level, line in done.log:
            getattr(context.log, level)(line)
        key = graph.key(declared.asset)
        partition = partition_of(assets, key, model, day.isoformat())
        report_stage(
            latest,
            assets,
            key,
            partition,
            done,
            tags={LAUNCHED_BY_TAG: UI, EVALUATION_TAG: context.run_id},
            metadata=as_metadata(done.metadata),
            work_id=context.run_id,
            checks_run_id=context.run_id,
        )
        context.log.info(f"{key.to_user_string()} {partition or ''} reported by this run")


def _refuse_unasked_new_partition(
    context: dg.AssetExecutionContext, model: str, day: date, names: SuiteNames
) -> None:
    """Fail before any model is called when the partition was never evaluated (nothing in
    the instance) and the run did not ask for a new evaluation (`asks_for_new_evaluations`):
    "Materialize unsynced" would otherwise run every test on every day of every model."""
    if asks_for_new_evaluations(context.run):
        return
    done = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=context.asset_key, asset_partitions=[context.partition_key]
        ),
        limit=1,
    )
    if done.records:
        return
    raise dg.Failure(
        description=f"{model} on {day} was never evaluated, and a run of the asset graph "
        "launched from the UI, a backfill of assets or automation never starts a new "
        "evaluation (each calls the model for every test). To evaluate it, launch the "
        f"{names.scoped('evaluate_model_day')} job for this partition (or backfill that job), run "
        f"`eval-pipeline test --date {day}`, or add the tag {EVALUATE_NEW_TAG}=true to the launch.",
        allow_retries=False,
    )

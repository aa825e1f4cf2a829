"""The agent runs of a (model, day) partition: what changed runs, the rest is reused."""

import asyncio
from collections.abc import Sequence

import dagster as dg
from pydantic import Field

from eval_pipeline.agents import answerer_identity
from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.metadata import digest, model_and_day, table_definition, table_written
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import forget_budget, run_agents


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
    model_day: dg.PartitionsDefinition,
    warehouse_keys: Sequence[dg.AssetKey],
    inputs: SuiteAssets,
    names: SuiteNames,
) -> dg.AssetsDefinition:
    """`agent_runs`, per model and day, reading the dbt models `warehouse_keys`."""

    @dg.asset(
        key=names.key("agent_runs"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=model_day,
        deps=[inputs.test_cases, inputs.agent_context, *warehouse_keys],
        kinds={"duckdb", "python"},
        metadata=table_definition("agent_runs"),
        description="Every agent run of the model on the day. Completed runs whose key (test, "
        "its input, model, context, attempt, day) is unchanged are reused, never re-run.",
    )
    def agent_runs(
        context: dg.AssetExecutionContext, config: AgentRunsConfig
    ) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        model, day = model_and_day(context)
        loaded, layout = suite.load(), suite.store()
        if not config.budget_round:
            forget_budget(layout, day)
        outcome = asyncio.run(
            run_agents(
                loaded,
                model,
                day,
                layout=layout,
                context=suite.agent_context(),
                select=config.select or None,
                no_cache=config.no_cache,
                recording=config.record,
                k=config.k,
                attempts=config.attempts,
                threads=config.threads,
            )
        )
        executed = outcome.executed
        context.log.info(
            f"{len(executed)} run(s) executed, {outcome.reused} reused, {outcome.carried} kept "
            f"from unselected tests, {outcome.errors} error(s)"
        )
        costs = [r.cost_usd for r in executed if r.cost_usd is not None]
        return dg.MaterializeResult(
            data_version=dg.DataVersion(
                digest([f"{r.key}:{r.status.value}" for r in outcome.runs])
            ),
            metadata={
                "runs": len(outcome.runs),
                "executed": len(executed),
                "reused": outcome.reused,
                "carried_over": outcome.carried,
                "answerer_changed": outcome.answerer_changed,
                "errors": outcome.errors,
                "tokens_executed": sum(r.usage.total_tokens for r in executed),
                "cost_usd_executed": dg.MetadataValue.float(sum(costs)) if costs else None,
                "model": model,
                "answerer": answerer_identity(loaded.config, model),
                **table_written(layout, "agent_runs", len(outcome.runs), model=model, run_date=day),
            },
        )

    return agent_runs

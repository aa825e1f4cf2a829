"""The agent runs of a (model, day) partition: what changed runs, the rest is reused."""

from collections.abc import Sequence

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.metadata import model_and_day, recorded, table_definition
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import stages


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
        options = stages.RunOptions(
            select=config.select,
            no_cache=config.no_cache,
            recording=config.record,
            k=config.k,
            attempts=config.attempts,
            threads=config.threads,
            budget_round=config.budget_round,
        )
        done = suite.replayed("agent_runs", model=model, day=day) or stages.agent_runs(
            suite.load(), model, day, suite.store(), suite.agent_context(), options
        )
        return recorded(context, done)

    return agent_runs

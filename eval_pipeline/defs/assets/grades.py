"""The grades of a (model, day) partition: every stored run graded, never the agent called."""

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.conditions import follows_parents
from eval_pipeline.defs.metadata import model_and_day, recorded, table_definition
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_DATE
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.grading import GRADING_CODE_VERSION
from eval_pipeline.pipeline import stages


class GradesConfig(dg.Config):
    """Launchpad options of a grades materialization."""

    rejudge: bool = Field(
        default=False,
        description="ask the judge and extraction model again instead of using cached answers",
    )
    rejudge_samples: int = Field(
        default=1,
        ge=1,
        description="judge each run with judged checks this many times, to measure the "
        "judge's self-agreement",
    )


def grades_asset(
    model_day: dg.PartitionsDefinition,
    agent_runs: dg.AssetsDefinition,
    reference_results: dg.AssetsDefinition,
    warehouse_variants: dg.AssetsDefinition,
    inputs: SuiteAssets,
    names: SuiteNames,
) -> dg.AssetsDefinition:
    """`grades`, per model and day, from the partition's runs and the day's references."""

    @dg.asset(
        key=names.key("grades"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=model_day,
        deps=[
            agent_runs,
            dg.AssetDep(reference_results, partition_mapping=BY_DATE),
            inputs.test_cases,
            inputs.grading_rules,
            warehouse_variants,
        ],
        code_version=GRADING_CODE_VERSION,
        kinds={"duckdb", "python"},
        metadata=table_definition("grades"),
        automation_condition=follows_parents(
            [agent_runs.key, reference_results.key], caches=[warehouse_variants.key]
        ),
        description="The grade of every run: passed, failed (the agent was wrong) or error. "
        "Grading reads stored runs and never calls the agent under test; new grading rules "
        "(tolerance, extraction, the judge and its prompts) or grading code regrade them.",
    )
    def grades(context: dg.AssetExecutionContext, config: GradesConfig) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        model, day = model_and_day(context)
        done = suite.replayed("grades", model=model, day=day) or stages.grades(
            suite.load(),
            model,
            day,
            suite.store(),
            suite.agent_context(),
            rejudge=config.rejudge,
            rejudge_samples=config.rejudge_samples,
        )
        return recorded(context, done)

    return grades

"""The grades of a (model, day) partition: every stored run graded, never the agent called."""

import asyncio

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.conditions import follows_parents
from eval_pipeline.defs.metadata import (
    digest,
    failures_table,
    model_and_day,
    percent,
    table_definition,
    table_written,
)
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_DATE
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.grading import GRADING_CODE_VERSION, GradeStatus
from eval_pipeline.pipeline import grade_runs


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
        layout = suite.store()
        graded = asyncio.run(
            grade_runs(
                suite.load(),
                model,
                day,
                layout=layout,
                context=suite.agent_context(),
                rejudge=config.rejudge,
                rejudge_samples=config.rejudge_samples,
            )
        )
        passed = sum(g.passed for g in graded)
        return dg.MaterializeResult(
            data_version=dg.DataVersion(
                digest([f"{g.name}:{g.attempt}:{g.status.value}" for g in graded])
            ),
            metadata={
                "pass_rate": dg.MetadataValue.float(
                    percent(passed / len(graded) if graded else 0.0)
                ),
                "passed": passed,
                "failed": sum(g.status is GradeStatus.FAILED for g in graded),
                "errors": sum(g.status is GradeStatus.ERROR for g in graded),
                "unverified": sum(not g.verified for g in graded),
                "failures": dg.MetadataValue.md(failures_table(graded)),
                **table_written(layout, "grades", len(graded), model=model, run_date=day),
            },
        )

    return grades

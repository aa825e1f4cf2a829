"""The grades of a (model, day) partition: every stored run graded, never the agent called."""

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents
from eval_pipeline.defs.metadata import model_and_day, recorded, table_definition
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.grading import grading_code
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


def grades_asset(graph: StageGraph) -> dg.AssetsDefinition:
    """`grades`, per model and day, from the partition's runs and the day's references."""
    names = graph.names

    @dg.asset(
        key=graph.key("grades"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("grades"),
        deps=graph.deps("grades"),
        code_version=grading_code(),  # an added check's edit makes the grades unsynced too
        kinds={"duckdb", "python"},
        metadata=table_definition("grades"),
        automation_condition=follows_parents(
            [graph.key("agent_runs"), graph.key("reference_results")],
            caches=[graph.key("warehouse_variants")],
        ),
        description="The grade of every run: passed, failed (the agent was wrong) or error. "
        "Grading reads stored runs and never calls the agent under test; new grading rules "
        "(tolerance, extraction, the judge and its prompts) or grading code regrade them.",
    )
    def grades(context: dg.AssetExecutionContext, config: GradesConfig) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        model, day = model_and_day(context)
        done = stages.grades(
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

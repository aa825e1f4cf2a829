"""The day's leaderboard and report; the report's step publishes results.duckdb."""

from datetime import date

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents, leaderboard_condition
from eval_pipeline.defs.metadata import recorded
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import stages


def leaderboard_asset(graph: StageGraph) -> dg.AssetsDefinition:
    """`leaderboard`, per day, once the day's model summaries are in."""
    names = graph.names

    @dg.asset(
        key=graph.key("leaderboard"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("leaderboard"),
        deps=graph.deps("leaderboard"),
        kinds={"duckdb"},
        automation_condition=leaderboard_condition(graph.key("model_summaries")),
        description="The day's models ranked by pass rate, then cost, with 95% intervals; "
        "each pair compared by a paired test (stored in model_comparisons), neighbours the "
        "test cannot tell apart marked as ties.",
    )
    def leaderboard(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        suite = suite_of(context, names)
        return recorded(context, stages.leaderboard(suite.store(), day))

    return leaderboard


def report_asset(graph: StageGraph) -> dg.AssetsDefinition:
    """`report`, per day, after the leaderboard."""
    names = graph.names

    @dg.asset(
        key=graph.key("report"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("report"),
        deps=graph.deps("report"),
        kinds={"markdown"},
        automation_condition=follows_parents([graph.key("leaderboard")]),
        description="The day's report: leaderboard, pass/fail grid and failures, as Markdown; "
        "then results.duckdb is published with every result so far.",
    )
    def report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        suite = suite_of(context, names)
        return recorded(context, stages.report(suite.store(), day))

    return report

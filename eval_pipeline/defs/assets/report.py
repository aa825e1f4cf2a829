"""The day's leaderboard and report; the report's step publishes results.duckdb."""

from datetime import date

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents, leaderboard_condition
from eval_pipeline.defs.metadata import recorded
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_DATE
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import stages


def leaderboard_asset(
    daily: dg.PartitionsDefinition, model_summaries: dg.AssetsDefinition, names: SuiteNames
) -> dg.AssetsDefinition:
    """`leaderboard`, per day, once the day's model summaries are in."""

    @dg.asset(
        key=names.key("leaderboard"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=daily,
        deps=[dg.AssetDep(model_summaries, partition_mapping=BY_DATE)],
        kinds={"duckdb"},
        automation_condition=leaderboard_condition(model_summaries.key),
        description="The day's models ranked by pass rate, then cost, with 95% intervals; "
        "each pair compared by a paired test (stored in model_comparisons), neighbours the "
        "test cannot tell apart marked as ties.",
    )
    def leaderboard(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        suite = suite_of(context, names)
        done = suite.replayed("leaderboard", day=day) or stages.leaderboard(suite.store(), day)
        return recorded(context, done)

    return leaderboard


def report_asset(
    daily: dg.PartitionsDefinition, leaderboard: dg.AssetsDefinition, names: SuiteNames
) -> dg.AssetsDefinition:
    """`report`, per day, after the leaderboard."""

    @dg.asset(
        key=names.key("report"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=daily,
        deps=[leaderboard],
        kinds={"markdown"},
        automation_condition=follows_parents([leaderboard.key]),
        description="The day's report: leaderboard, pass/fail grid and failures, as Markdown; "
        "then results.duckdb is published with every result so far.",
    )
    def report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        suite = suite_of(context, names)
        done = suite.replayed("report", day=day) or stages.report(suite.store(), day)
        return recorded(context, done)

    return report

"""The day's leaderboard and report; the report's step publishes results.duckdb."""

from datetime import date

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents, leaderboard_condition
from eval_pipeline.defs.metadata import budget_metadata
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_DATE
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import (
    day_leaderboard,
    failure_kinds_markdown,
    stored_budget,
    write_report,
)
from eval_pipeline.store import publish_results


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
        suite = suite_of(context, names)
        day = date.fromisoformat(context.partition_key)
        layout = suite.store()
        board = day_leaderboard(layout, day, store_comparisons=True)
        return dg.MaterializeResult(
            metadata={
                "leaderboard": dg.MetadataValue.md(board.markdown()),
                "ranking": dg.MetadataValue.json(board.models),
                "ties_not_significant": dg.MetadataValue.json(board.ties),
                "detectable_difference": board.detectable or "only one model: nothing compared",
                "failure_kinds": dg.MetadataValue.md(failure_kinds_markdown(layout, day)),
            }
        )

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
        suite = suite_of(context, names)
        day = date.fromisoformat(context.partition_key)
        layout = suite.store()
        path, text = write_report(layout, day)
        # The evaluation's last step: results.duckdb now holds its results for other clients.
        published = publish_results(layout)
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(str(path)),
                "report": dg.MetadataValue.md(text),
                "results_database": dg.MetadataValue.path(str(layout.database)),
                "results_database_rebuilt": published,
                **budget_metadata(stored_budget(layout, day)),
            }
        )

    return report

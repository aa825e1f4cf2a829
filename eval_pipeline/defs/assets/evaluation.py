"""The evaluation assets, wired: references per day; runs, grades and summaries per model and day; the day's leaderboard and report. Each is built in its own module."""

from collections.abc import Sequence
from dataclasses import dataclass, fields

import dagster as dg

from eval_pipeline.defs.assets.grades import grades_asset
from eval_pipeline.defs.assets.references import reference_results_asset
from eval_pipeline.defs.assets.report import leaderboard_asset, report_asset
from eval_pipeline.defs.assets.runs import agent_runs_asset
from eval_pipeline.defs.assets.summaries import model_summaries_asset
from eval_pipeline.defs.stage_graph import StageGraph


@dataclass(frozen=True)
class EvaluationAssets:
    """The evaluation assets by name, so wiring never depends on their order."""

    reference_results: dg.AssetsDefinition
    agent_runs: dg.AssetsDefinition
    grades: dg.AssetsDefinition
    model_summaries: dg.AssetsDefinition
    leaderboard: dg.AssetsDefinition
    report: dg.AssetsDefinition

    @property
    def all(self) -> list[dg.AssetsDefinition]:
        return [getattr(self, f.name) for f in fields(self)]


def build_evaluation_assets(
    graph: StageGraph, warehouse_keys: Sequence[dg.AssetKey]
) -> EvaluationAssets:
    """The partitioned assets and their checks, wired as `graph` declares them;
    `warehouse_keys` are the dbt models they query."""
    return EvaluationAssets(
        reference_results=reference_results_asset(graph, warehouse_keys),
        agent_runs=agent_runs_asset(graph, warehouse_keys),
        grades=grades_asset(graph),
        model_summaries=model_summaries_asset(graph),
        leaderboard=leaderboard_asset(graph),
        report=report_asset(graph),
    )

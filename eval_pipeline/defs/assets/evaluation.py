"""The evaluation assets, wired: references per day; runs, grades and summaries per model and day; the day's leaderboard and report. Each is built in its own module."""

from collections.abc import Sequence
from dataclasses import dataclass, fields

import dagster as dg

from eval_pipeline.defs.assets.grades import grades_asset
from eval_pipeline.defs.assets.references import reference_results_asset
from eval_pipeline.defs.assets.report import leaderboard_asset, report_asset
from eval_pipeline.defs.assets.runs import agent_runs_asset
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.assets.summaries import model_summaries_asset
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import DayPartitions


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

    @property
    def per_model_day(self) -> list[dg.AssetsDefinition]:
        """What one evaluation of a (model, day) partition materializes: runs, grades, summary."""
        return [self.agent_runs, self.grades, self.model_summaries]


def build_evaluation_assets(
    warehouse_keys: Sequence[dg.AssetKey],
    warehouse_variants: dg.AssetsDefinition,
    partitions: DayPartitions,
    inputs: SuiteAssets,
    names: SuiteNames,
) -> EvaluationAssets:
    """The partitioned assets and their checks; `warehouse_keys` are the dbt models they
    query, `warehouse_variants` the variants that grades re-run semantic checks on,
    `partitions` the suite's days (from where its history starts), `inputs` what the user
    writes, `names` how the suite's assets are keyed."""
    daily, model_day = partitions.daily, partitions.model_day
    reference_results = reference_results_asset(daily, warehouse_keys, inputs, names)
    agent_runs = agent_runs_asset(model_day, warehouse_keys, inputs, names)
    grades = grades_asset(
        model_day, agent_runs, reference_results, warehouse_variants, inputs, names
    )
    model_summaries = model_summaries_asset(model_day, grades, names)
    leaderboard = leaderboard_asset(daily, model_summaries, names)
    return EvaluationAssets(
        reference_results=reference_results,
        agent_runs=agent_runs,
        grades=grades,
        model_summaries=model_summaries,
        leaderboard=leaderboard,
        report=report_asset(daily, leaderboard, names),
    )

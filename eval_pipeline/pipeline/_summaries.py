"""The summary stage of one (model, day) partition: its stored grades into its `model_summaries` row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from eval_pipeline.grading import (
    CaseMetrics,
    ModelSummary,
    RunOutcome,
    case_metrics,
    summarize_models,
)
from eval_pipeline.pipeline._comparisons import model_intervals
from eval_pipeline.store import StateFolder, read_latest, updating_partition, write_rows
from eval_pipeline.suite import Suite


@dataclass(frozen=True)
class PartitionSummary:
    """A partition's summary, its per-test metrics and the 95% interval on its pass rate
    (fractions; `pass_rate_interval`)."""

    summary: ModelSummary
    cases: list[CaseMetrics]
    interval: tuple[float, float]

    def to_row(self, suite_hash: str) -> dict[str, Any]:
        low, high = self.interval
        return {**asdict(self.summary), "ci_low": low, "ci_high": high, "suite_hash": suite_hash}


def summarize_grades(grade_rows: Sequence[Mapping[str, Any]]) -> PartitionSummary:
    """The summary of one partition's `grades` rows (one model, one day)."""
    outcomes = [RunOutcome.from_grade_row(row) for row in grade_rows]
    (summary,) = summarize_models(outcomes)
    (interval,) = model_intervals(outcomes).values()
    return PartitionSummary(summary, case_metrics(outcomes), interval)


def summarize_partition(
    suite: Suite, model: str, run_date: date, *, layout: StateFolder
) -> PartitionSummary | None:
    """Summarize the partition's stored grades into its `model_summaries` row (held like
    `grade_partition`, so the summary written last is of the grades written last)."""
    with updating_partition(layout, model, run_date):
        rows = read_latest(layout, "grades", model=model, run_date=run_date)
        result = summarize_grades(rows) if rows else None
        summary = [{**result.to_row(suite.hash), "run_date": run_date}] if result else []
        write_rows(layout, "model_summaries", summary, model=model, run_date=run_date)
    return result

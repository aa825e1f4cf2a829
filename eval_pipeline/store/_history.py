"""The history questions every reader of the store asks: which days and models have grades.

The CLI (`diff`, `export`), the gates and the history checks ask them in these words, so
each is one query here rather than one per caller.
"""

from __future__ import annotations

from datetime import date

from eval_pipeline.store._database import query
from eval_pipeline.store._state_folder import StateFolder


def graded_days(layout: StateFolder) -> list[date]:
    """Every day with grades in the store, newest first."""
    frame = query(
        layout, "SELECT DISTINCT CAST(run_date AS VARCHAR) AS d FROM grades ORDER BY d DESC"
    )
    return [date.fromisoformat(value) for value in frame["d"]]


def latest_graded_day(layout: StateFolder) -> date | None:
    """The latest day with grades in the store, None when there is none."""
    return _day(query(layout, "SELECT CAST(max(run_date) AS VARCHAR) AS d FROM grades"))


def previous_graded_day(layout: StateFolder, model: str, day: date) -> date | None:
    """The last day before `day` on which the model has grades (None before its first)."""
    return _day(
        query(
            layout,
            "SELECT CAST(max(run_date) AS VARCHAR) AS d FROM grades "
            "WHERE model = ? AND run_date < ?",
            [model, day],
        )
    )


def models_graded_on(layout: StateFolder, day: date) -> list[str]:
    """The models with grades on `day`, in name order."""
    frame = query(
        layout, "SELECT DISTINCT model FROM grades WHERE run_date = ? ORDER BY model", [day]
    )
    return list(frame["model"])


def _day(frame) -> date | None:
    value = frame["d"][0]
    return date.fromisoformat(value) if isinstance(value, str) else None

"""The history questions every reader of the store asks: which days and models have grades.

The CLI (`diff`, `export`), the gates and the history checks ask them of the store; the
viewer asks the same of the snapshot its page reads (`GradesHistory.of_connection`). Each
question is one query here, whoever asks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import duckdb

from eval_pipeline.store._database import query
from eval_pipeline.store._state_folder import StateFolder

#: A statement and its parameters in, the rows out.
Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class GradesHistory:
    """The history questions over a relation of grades (the store's `grades`, or a page's
    snapshot of it), asked through `rows`."""

    rows: Rows
    relation: str = "grades"

    @classmethod
    def of_store(cls, layout: StateFolder) -> GradesHistory:
        def rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            return list(query(layout, sql, list(params)).itertuples(index=False, name=None))

        return cls(rows)

    @classmethod
    def of_connection(cls, con: duckdb.DuckDBPyConnection, relation: str) -> GradesHistory:
        return cls(lambda sql, params: con.execute(sql, list(params)).fetchall(), relation)

    def days(self) -> list[date]:
        """Every day with grades, newest first."""
        found = self.rows(
            f"SELECT DISTINCT CAST(run_date AS VARCHAR) FROM {self.relation} ORDER BY 1 DESC", ()
        )
        return [date.fromisoformat(value) for (value,) in found]

    def latest_day(self) -> date | None:
        """The latest day with grades, None when there is none."""
        return _day(self.rows(f"SELECT CAST(max(run_date) AS VARCHAR) FROM {self.relation}", ()))

    def previous_day(self, model: str, day: date) -> date | None:
        """The last day before `day` on which the model has grades (None before its first)."""
        return _day(
            self.rows(
                f"SELECT CAST(max(run_date) AS VARCHAR) FROM {self.relation} "
                "WHERE model = ? AND run_date < ?",
                (model, day),
            )
        )

    def models(self) -> list[str]:
        """Every model with grades, in name order."""
        return [
            m for (m,) in self.rows(f"SELECT DISTINCT model FROM {self.relation} ORDER BY 1", ())
        ]

    def models_on(self, day: date) -> list[str]:
        """The models with grades on `day`, in name order."""
        found = self.rows(
            f"SELECT DISTINCT model FROM {self.relation} WHERE run_date = ? ORDER BY 1", (day,)
        )
        return [m for (m,) in found]


def graded_days(layout: StateFolder) -> list[date]:
    """Every day with grades in the store, newest first."""
    return GradesHistory.of_store(layout).days()


def latest_graded_day(layout: StateFolder) -> date | None:
    """The latest day with grades in the store, None when there is none."""
    return GradesHistory.of_store(layout).latest_day()


def previous_graded_day(layout: StateFolder, model: str, day: date) -> date | None:
    """The last day before `day` on which the model has grades (None before its first)."""
    return GradesHistory.of_store(layout).previous_day(model, day)


def models_graded_on(layout: StateFolder, day: date) -> list[str]:
    """The models with grades on `day`, in name order."""
    return GradesHistory.of_store(layout).models_on(day)


def _day(rows: list[tuple[Any, ...]]) -> date | None:
    value = rows[0][0] if rows else None
    return date.fromisoformat(value) if isinstance(value, str) else None

"""The day's report: leaderboard, pass/fail grid by test and model, and the failures, in Markdown."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd

from eval_pipeline.grading import GradeStatus
from eval_pipeline.pipeline._comparisons import (
    comparisons_of,
    day_outcomes,
    detectable_difference,
    model_intervals,
    write_comparisons,
)
from eval_pipeline.store import StateFolder, query, writing_below
from eval_pipeline.suite import redact


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(nothing yet)"
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = [
        "| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows])


def leaderboard(layout: StateFolder, day: date) -> pd.DataFrame:
    """The day's models ranked by pass rate, then cost (unknown cost last)."""
    return query(
        layout,
        """
        SELECT model, round(100 * pass_rate, 1) AS pass_rate_pct, passed || '/' || total AS passed,
               errors, tokens, round(cost_usd, 4) AS cost_usd,
               round(avg_duration_ms / 1000, 1) AS avg_time_s, round(avg_tool_calls, 1) AS avg_tools
        FROM model_summaries WHERE run_date = ?
        ORDER BY pass_rate DESC, cost_usd ASC NULLS LAST, model
        """,
        [day],
    )


@dataclass(frozen=True)
class Leaderboard:
    """The day's ranked models with their 95% intervals, each marked against the next one
    down ("tie": the paired test does not tell them apart), the pairwise `comparisons` and
    the minimum-detectable-difference sentence."""

    table: pd.DataFrame
    comparisons: list[dict[str, Any]]
    detectable: str | None

    @property
    def models(self) -> list[str]:
        return list(self.table["model"]) if not self.table.empty else []

    @property
    def ties(self) -> list[list[str]]:
        """Neighbours in the ranking that the paired test cannot tell apart."""
        return [[c["model_a"], c["model_b"]] for c in self._neighbours() if not c["significant"]]

    def _neighbours(self) -> list[dict[str, Any]]:
        pairs = {(c["model_a"], c["model_b"]): c for c in self.comparisons}
        ranked = self.models
        return [pairs[(a, b)] for a, b in itertools.pairwise(ranked) if (a, b) in pairs]

    def markdown(self) -> str:
        parts = [_table(self.table)]
        if self.comparisons:
            frame = pd.DataFrame(self.comparisons)
            frame["p_value"] = frame["p_value"].round(4)
            frame["p_adjusted"] = frame["p_adjusted"].round(4)
            parts += ["Is the difference real? (paired tests, Holm-adjusted)", _table(frame)]
        if self.detectable:
            parts.append(self.detectable[0].upper() + self.detectable[1:] + ".")
        return "\n\n".join(parts)


def day_leaderboard(
    layout: StateFolder, day: date, *, store_comparisons: bool = False
) -> Leaderboard:
    """The day's leaderboard with its statistics; `store_comparisons` also writes the pairs to
    `model_comparisons` (the leaderboard asset does, once per day)."""
    frame = leaderboard(layout, day)
    outcomes = day_outcomes(layout, day)
    intervals = model_intervals(outcomes)
    comparisons = comparisons_of(outcomes, list(frame["model"]))
    if store_comparisons:
        write_comparisons(layout, day, comparisons)
    board = Leaderboard(frame, comparisons, detectable_difference(comparisons))
    if frame.empty:
        return board
    marks = {c["model_a"]: c for c in board._neighbours()}
    frame.insert(
        2,
        "ci95_pct",
        [
            f"{100 * intervals[m][0]:.1f}–{100 * intervals[m][1]:.1f}" if m in intervals else ""
            for m in frame["model"]
        ],
    )
    frame["vs_next"] = [_versus(marks.get(m)) for m in frame["model"]]
    return board


def _versus(comparison: dict[str, Any] | None) -> str:
    if comparison is None:
        return ""
    verdict = "better than" if comparison["significant"] else "tie with"
    return f"{verdict} {comparison['model_b']} (p_adj {comparison['p_adjusted']:.3f})"


def leaderboard_markdown(layout: StateFolder, day: date) -> str:
    return day_leaderboard(layout, day).markdown()


def failure_kinds(layout: StateFolder, day: date) -> pd.DataFrame:
    """Per model, how many of the day's failed data checks were each kind of mistake."""
    return query(
        layout,
        """
        SELECT model, failure_kind, count(*) AS runs FROM grades
        WHERE run_date = ? AND failure_kind IS NOT NULL
        GROUP BY model, failure_kind ORDER BY model, runs DESC, failure_kind
        """,
        [day],
    )


def failure_kinds_markdown(layout: StateFolder, day: date) -> str:
    return _table(failure_kinds(layout, day))


def pass_fail_grid(layout: StateFolder, day: date) -> pd.DataFrame:
    """One row per test, one column per model: ✓ when every attempt passed, else ✗ (or E
    when every attempt was an error)."""
    marks = query(
        layout,
        """
        SELECT name, model,
               CASE WHEN bool_and(status = ?) THEN '✓'
                    WHEN bool_and(status = ?) THEN 'E' ELSE '✗' END AS mark
        FROM grades WHERE run_date = ? GROUP BY name, model ORDER BY name, model
        """,
        [GradeStatus.PASSED.value, GradeStatus.ERROR.value, day],
    )
    if marks.empty:
        return marks
    grid = marks.set_index(["name", "model"])["mark"].unstack("model").fillna("")
    grid.columns.name = None
    return grid.reset_index().rename(columns={"name": "test"})


def write_report(layout: StateFolder, day: date) -> tuple[Path, str]:
    failures = query(
        layout,
        "SELECT name AS test, model, attempt, status, message FROM grades "
        "WHERE run_date = ? AND NOT passed ORDER BY model, name, attempt",
        [day],
    )
    text = "\n\n".join(
        [
            f"# Evaluation report, {day.isoformat()}",
            "## Performance by model",
            leaderboard_markdown(layout, day),
            "## Why failed queries missed (failure kinds)",
            failure_kinds_markdown(layout, day),
            "## Pass / fail by test and model",
            _table(pass_fail_grid(layout, day)),
            f"## Failed and errored runs ({len(failures)})",
            _table(failures),
        ]
    )
    path = layout.report_file(day)
    text = redact(text)  # the store is redacted; older rows may predate a secret's registration
    with writing_below(layout.root):  # a full disk names the state folder, as the store does
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    return path, text

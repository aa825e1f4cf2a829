"""The day's report: leaderboard, pass/fail grid by test and model, and the failures, in Markdown."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd

from eval_pipeline.grading import GradeStatus
from eval_pipeline.store import StoreLayout, query
from eval_pipeline.suite._secrets import redact


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


def leaderboard(layout: StoreLayout, day: date) -> pd.DataFrame:
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


def leaderboard_markdown(layout: StoreLayout, day: date) -> str:
    return _table(leaderboard(layout, day))


def failure_kinds(layout: StoreLayout, day: date) -> pd.DataFrame:
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


def failure_kinds_markdown(layout: StoreLayout, day: date) -> str:
    return _table(failure_kinds(layout, day))


def pass_fail_grid(layout: StoreLayout, day: date) -> pd.DataFrame:
    """One row per test, one column per model: ✓ when every attempt passed, else ✗ (or E)."""
    grades = query(
        layout, "SELECT name, model, status FROM grades WHERE run_date = ? ORDER BY name", [day]
    )
    if grades.empty:
        return grades

    def mark(statuses: pd.Series) -> str:
        if (statuses == GradeStatus.PASSED).all():
            return "✓"
        return "E" if (statuses == GradeStatus.ERROR).all() else "✗"

    grid = grades.groupby(["name", "model"])["status"].agg(mark).unstack("model").fillna("")
    return grid.reset_index().rename(columns={"name": "test"})


def write_report(layout: StoreLayout, day: date) -> tuple[Path, str]:
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
    path.parent.mkdir(parents=True, exist_ok=True)
    text = redact(text)  # the store is redacted; older rows may predate a secret's registration
    path.write_text(text + "\n", encoding="utf-8")
    return path, text

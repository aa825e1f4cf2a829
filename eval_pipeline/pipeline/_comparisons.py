"""Is the difference real? A day's intervals, paired comparisons and detectable difference.

One place turns graded runs into these statistics, so the results file, the
`model_comparisons` table, the CLI, the leaderboard and the viewer all show the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any

from eval_pipeline.grading import (
    RunOutcome,
    attempts_by_model,
    day_comparisons,
    detectable_difference_sentence,
    pass_rate_interval,
)
from eval_pipeline.store import StateFolder, fetch, write_rows

COMPARISON_COLUMNS = (
    "model_a",
    "model_b",
    "tests",
    "a_only",
    "b_only",
    "p_value",
    "p_adjusted",
    "significant",
)


def model_intervals(outcomes: Iterable[RunOutcome]) -> dict[str, tuple[float, float]]:
    """Model → 95% interval on its pass rate (fractions; Wilson, clustered by test when a
    test has several attempts: `pass_rate_interval`)."""
    return {
        model: pass_rate_interval(tests.values())
        for model, tests in attempts_by_model(outcomes).items()
    }


def comparisons_of(
    outcomes: Iterable[RunOutcome], ranked_models: Sequence[str]
) -> list[dict[str, Any]]:
    """Every pair of the day's models, ranked first (model_a is the better ranked of a pair),
    Holm-adjusted across the pairs: the results file's `comparisons`."""
    attempts = attempts_by_model(outcomes)
    ordered = {m: attempts[m] for m in ranked_models if m in attempts}
    return day_comparisons(ordered)


def detectable_difference(comparisons: Sequence[Mapping[str, Any]]) -> str | None:
    """The day's minimum-detectable-difference sentence: for the largest shared test set,
    at the discordance pooled over every pair (None with no pair)."""
    if not comparisons:
        return None
    tests = max(int(c["tests"]) for c in comparisons)
    split = sum(int(c["a_only"]) + int(c["b_only"]) for c in comparisons)
    return detectable_difference_sentence(tests, split / sum(int(c["tests"]) for c in comparisons))


def day_outcomes(layout: StateFolder, day: date) -> list[RunOutcome]:
    """Every graded run of the day, each model's latest grades."""
    # Rows as DuckDB gives them: a DataFrame's records of Arrow-backed columns took a second
    # at 1,500 runs.
    columns, rows = fetch(
        layout,
        "SELECT name, model, attempt, status, tokens, cost_usd, duration_ms, tool_call_count, "
        "verified FROM grades WHERE run_date = ?",
        [day],
    )
    return [RunOutcome.from_grade_row(dict(zip(columns, row, strict=True))) for row in rows]


def write_comparisons(
    layout: StateFolder, day: date, comparisons: Sequence[Mapping[str, Any]]
) -> None:
    """Store the day's pairs in `model_comparisons` (the day's partition is rewritten whole,
    so a model dropped from the day drops its pairs)."""
    rows = [{**c, "run_date": day} for c in comparisons]
    write_rows(layout, "model_comparisons", rows, run_date=day)

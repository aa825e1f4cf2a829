"""The report's pass/fail grid: a mark per test and model from all of its attempts."""

from __future__ import annotations

from datetime import date

from eval_pipeline.pipeline._report import pass_fail_grid  # the unit itself: the report's grid
from eval_pipeline.store import StateFolder, ensure_database, write_rows

DAY = date(2026, 2, 3)


def grade(name: str, model: str, attempt: int, status: str, day: date = DAY) -> dict[str, object]:
    return {
        "run_key": f"{name}-{model}-{attempt}",
        "name": name,
        "model": model,
        "run_date": day,
        "attempt": attempt,
        "status": status,
        "passed": status == "passed",
        "message": status,
    }


def test_a_test_passes_only_when_every_attempt_did_and_errors_only_when_all_were(tmp_path):
    layout = StateFolder(tmp_path / ".eval")
    ensure_database(layout)
    attempts = {
        ("revenue", "b:model"): ["passed", "passed"],
        ("revenue", "a:model"): ["passed", "failed"],
        ("churn", "b:model"): ["error", "error"],
        ("churn", "a:model"): ["error", "failed"],
    }
    for model in ("a:model", "b:model"):
        rows = [
            grade(name, m, attempt, status)
            for (name, m), statuses in attempts.items()
            if m == model
            for attempt, status in enumerate(statuses)
        ]
        write_rows(layout, "grades", rows, model=model, run_date=DAY)
    # another day's grades are not in this day's grid
    write_rows(
        layout,
        "grades",
        [grade("other", "a:model", 0, "passed", day=date(2026, 2, 4))],
        model="a:model",
        run_date=date(2026, 2, 4),
    )

    grid = pass_fail_grid(layout, DAY)

    assert list(grid.columns) == ["test", "a:model", "b:model"]
    assert grid.to_dict("records") == [
        {"test": "churn", "a:model": "✗", "b:model": "E"},
        {"test": "revenue", "a:model": "✗", "b:model": "✓"},
    ]


def test_a_model_without_a_grade_of_a_test_leaves_its_cell_empty(tmp_path):
    layout = StateFolder(tmp_path / ".eval")
    ensure_database(layout)
    write_rows(
        layout, "grades", [grade("revenue", "a:model", 0, "passed")], model="a:model", run_date=DAY
    )
    write_rows(
        layout, "grades", [grade("churn", "b:model", 0, "failed")], model="b:model", run_date=DAY
    )

    assert pass_fail_grid(layout, DAY).to_dict("records") == [
        {"test": "churn", "a:model": "", "b:model": "✗"},
        {"test": "revenue", "a:model": "✓", "b:model": ""},
    ]
    assert pass_fail_grid(layout, date(2026, 1, 1)).empty

"""A fresh store per test, and grade rows to write into it."""

from __future__ import annotations

from datetime import date

import pytest

from eval_pipeline.store import StateFolder, ensure_database

DAY = date(2026, 6, 1)


@pytest.fixture
def layout(tmp_path):
    layout = StateFolder(tmp_path / ".eval")
    ensure_database(layout)
    return layout


def grade(name: str, model: str, status: str, run_date: date = DAY) -> dict:
    """A `grades` row with one data check."""
    return {
        "name": name,
        "model": model,
        "run_date": run_date,
        "attempt": 0,
        "status": status,
        "passed": status == "passed",
        "checks": [{"kind": "data", "status": status}],
    }

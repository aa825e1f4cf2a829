"""The suite stage: a snapshot of the test cases in the store, for SQL and reports."""

from __future__ import annotations

from eval_pipeline.store import StateFolder, write_rows
from eval_pipeline.suite import Suite


def record_cases(suite: Suite, layout: StateFolder) -> None:
    """Write the current cases as the `test_cases` table (the previous snapshots stay in history)."""
    rows = [{**case.to_record(), "suite_hash": suite.hash} for case in suite.cases]
    write_rows(layout, "test_cases", rows)

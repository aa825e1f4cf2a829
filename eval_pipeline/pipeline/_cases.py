"""The suite stage: a snapshot of the test cases in the store, for SQL and reports."""

from __future__ import annotations

from eval_pipeline.store import StateFolder, write_rows
from eval_pipeline.suite import Suite


def snapshot_cases(suite: Suite, layout: StateFolder) -> None:
    """Snapshot the current cases as the `test_cases` table's rows (the previous snapshots stay
    in history)."""
    suite_hash = suite.hash  # hashes every case: once, not once per case
    rows = [{**case.to_row(), "suite_hash": suite_hash} for case in suite.cases]
    write_rows(layout, "test_cases", rows)

"""The pretty report of a large run: the runs that did not pass, the passing ones counted."""

from __future__ import annotations

import io
from datetime import date

from eval_pipeline.cli._render import (  # the unit itself: the report of a document built by hand
    FULL_REPORT_MAX_RUNS,
    print_report,
    report_console,
)
from eval_pipeline.pipeline import build_results
from eval_pipeline_tests.cli.test_verbose_report import MODEL, run_row

DAY = date(2026, 1, 5)


def report(runs: int, **flags: bool) -> str:
    rows = [run_row(f"t{i:04d}", "failed" if i == 7 else "passed") for i in range(runs)]
    document = build_results(rows, [MODEL], [r["name"] for r in rows], DAY)
    console = report_console(io.StringIO())
    print_report(console, document, [MODEL], changes={}, executed=runs, reused=0, **flags)
    return console.file.getvalue()


def test_past_the_limit_only_the_runs_that_did_not_pass_are_listed_and_the_rest_counted():
    runs = FULL_REPORT_MAX_RUNS + 1
    text = report(runs)
    assert "t0007" in text and "t0006" not in text
    assert (
        f"{runs - 1} passing run(s) not shown (more than {FULL_REPORT_MAX_RUNS} runs; "
        "--all-runs lists them)" in text
    )
    assert f"{runs - 1}/{runs} passed" in text


def test_all_runs_and_a_run_within_the_limit_list_every_run():
    assert "t0006" in report(FULL_REPORT_MAX_RUNS + 1, all_runs=True)
    within = report(FULL_REPORT_MAX_RUNS)
    assert "t0006" in within and "not shown" not in within


def test_failures_only_keeps_its_own_reason_past_the_limit():
    text = report(FULL_REPORT_MAX_RUNS + 1, failures_only=True)
    assert f"{FULL_REPORT_MAX_RUNS} passing run(s) not shown (--failures-only)" in text

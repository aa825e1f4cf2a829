"""One fresh evaluation of a suite through the pipeline layer alone, without Dagster: the bar for the command.

Run: python benchmarks/pipeline_alone.py SUITE_FOLDER MODEL [--date 2026-03-02]

The same steps as `eval-pipeline test` on one model and day (the test snapshot, the
references, the runs, their grades, the summary and its checks, the leaderboard, the report,
results.duckdb), called in this process without importing Dagster, without an instance, runs
or their event log. It is a measurement, not a way to evaluate: nothing is recorded for the
UI. `benchmarks/versus_nao.py` runs it beside the command, and the difference is what the
Dagster record costs the command today.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

STARTED = time.perf_counter()

from datetime import date  # noqa: E402
from pathlib import Path  # noqa: E402

from eval_pipeline.pipeline import (  # noqa: E402
    check_partition,
    compute_references,
    day_leaderboard,
    grade_runs,
    run_agents,
    snapshot_cases,
    summarize_partition,
    write_report,
)
from eval_pipeline.store import StateFolder, publish_results  # noqa: E402
from eval_pipeline.suite import load_agent_context, load_suite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("suite", type=Path)
    parser.add_argument("model")
    parser.add_argument("--date", default="2026-03-02")
    options = parser.parse_args()
    imported = time.perf_counter() - STARTED
    day = date.fromisoformat(options.date)
    suite = load_suite(options.suite)
    layout = StateFolder(suite.config.state_path)
    context = load_agent_context(suite.config)
    snapshot_cases(suite, layout)
    compute_references(suite, day, layout=layout)
    asyncio.run(run_agents(suite, options.model, day, layout=layout, context=context))
    graded = asyncio.run(grade_runs(suite, options.model, day, layout=layout, context=context))
    result = summarize_partition(suite, options.model, day, layout=layout)
    settings = suite.config.test
    check_partition(
        layout,
        options.model,
        day,
        result.cases if result else [],
        min_accuracy=settings.min_accuracy,
        mode=settings.threshold_mode,
        significant_only=settings.regression_significant_only,
    )
    day_leaderboard(layout, day, store_comparisons=True)
    write_report(layout, day)
    publish_results(layout)
    passed = sum(g.passed for g in graded)
    print(
        f"{passed}/{len(graded)} passed; imports {imported:.2f} s, in all "
        f"{time.perf_counter() - STARTED:.2f} s; Dagster imported: {'dagster' in sys.modules}"
    )
    sys.stdout.flush()
    os._exit(0)  # as the console script ends


if __name__ == "__main__":
    main()

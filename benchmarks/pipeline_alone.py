"""One fresh evaluation of a suite through the pipeline layer alone, without Dagster: the bar for the command.

Run: python benchmarks/pipeline_alone.py SUITE_FOLDER MODEL [--date 2026-03-02]

The same steps as `eval-pipeline test` on one model and day (the test snapshot, the
references, the runs, their grades, the summary and its checks, the leaderboard, the report,
results.duckdb): the assets' own stage functions (`eval_pipeline.pipeline.stages`),
called in this process without importing Dagster, without an instance, runs
or their event log. It is a measurement, not a way to evaluate: nothing is recorded for the
UI. `benchmarks/versus_nao.py` runs it beside the command, and the difference is what the
Dagster record costs the command today.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

STARTED = time.perf_counter()

from datetime import date  # noqa: E402
from pathlib import Path  # noqa: E402

from eval_pipeline.pipeline import stages  # noqa: E402
from eval_pipeline.store import StateFolder  # noqa: E402
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
    model = options.model
    # The assets' own stage functions, in the order the command's Dagster runs call them.
    stages.test_cases(suite, layout)
    stages.agent_context(context)
    stages.grading_rules(suite.config)
    stages.reference_results(suite, day, layout)
    stages.warehouse_variants(suite, layout)
    stages.agent_runs(suite, model, day, layout, context, stages.RunOptions())
    graded = stages.grades(suite, model, day, layout, context)
    stages.model_summaries(suite, model, day, layout)
    stages.leaderboard(layout, day)
    stages.report(layout, day)
    passed, runs = graded.metadata["passed"], graded.metadata["dagster/row_count"]
    print(
        f"{passed}/{runs} passed; imports {imported:.2f} s, in all "
        f"{time.perf_counter() - STARTED:.2f} s; Dagster imported: {'dagster' in sys.modules}"
    )
    sys.stdout.flush()
    os._exit(0)  # as the console script ends


if __name__ == "__main__":
    main()

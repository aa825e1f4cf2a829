"""Whatever the command line leaves, a backfill from the UI carries through to every day's report.

The command line's evaluation (`run_evaluation`, what `eval-pipeline test` runs) records in the
suite's own instance, tagged as launched by the CLI, and automation never repeats what it did.
Here the UI had built the warehouse variants once; then a test is edited and evaluated again
from the command line. Nothing the command made may be left unsynced, and a backfill of the
runs of two past days, driven tick by tick as the daemon evaluates automation, ends with their
grades, summaries, leaderboards and reports.
"""

from __future__ import annotations

from datetime import date

import pytest

from eval_pipeline.defs.evaluate import run_evaluation
from eval_pipeline.defs.instance import instance_home, open_instance
from eval_pipeline.defs.partitions import model_day_key, today
from eval_pipeline.pipeline import EvaluationRequest
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.pipeline.automation import drive, fresh, materialized
from eval_pipeline_tests.pipeline.small_suite import DAY, MODELS, NEXT_DAY, evaluate, materialize

pytestmark = pytest.mark.slow  # Dagster runs, in the suite's own SQLite instance


def cli_evaluation(root, day: str) -> None:
    suite = load_suite(root)
    run_evaluation(suite, EvaluationRequest(models=(MODELS[0],), run_date=date.fromisoformat(day)))


def test_a_backfill_after_command_line_runs_reaches_every_report(small_suite):
    day = today().isoformat()  # once: both command-line runs are of one day, also at midnight
    cli_evaluation(small_suite.root, day)
    home = instance_home(load_suite(small_suite.root).config)
    defs = small_suite.definitions()
    with open_instance(home) as instance:
        # What automation does after an edit the UI saw: it builds the variants.
        assert materialize(defs, ["warehouse_variants"], instance=instance).success

    small_suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")
    cli_evaluation(small_suite.root, day)

    with open_instance(home) as instance:
        for asset, partition in [
            ("warehouse_variants", None),
            ("reference_results", day),
            ("agent_runs", model_day_key(MODELS[0], day)),
            ("grades", model_day_key(MODELS[0], day)),
            ("model_summaries", model_day_key(MODELS[0], day)),
            ("report", day),
        ]:
            assert fresh(defs, instance, asset, partition), (
                f"the CLI left {asset} {partition} unsynced"
            )
        cursor, _ = drive(defs, instance)  # the daemon's ticks after the command: nothing to do

        days = (DAY, NEXT_DAY)
        assert all(d < day for d in days)
        for past in days:  # what a backfill of the runs of two past days launches
            evaluate(defs, instance, MODELS[0], past, assets=["agent_runs"])
        drive(defs, instance, cursor)

        keys = {str(model_day_key(MODELS[0], past)) for past in days}
        assert keys <= materialized(instance, "grades")
        assert keys <= materialized(instance, "model_summaries")
        assert set(days) <= materialized(instance, "report")
        for past in days:
            key = model_day_key(MODELS[0], past)
            assert fresh(defs, instance, "grades", key) and fresh(
                defs, instance, "model_summaries", key
            )

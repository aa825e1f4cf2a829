"""A command's evaluation recorded in the suite's Dagster instance, after the command did the work.

`eval-pipeline test` runs the stages in its own process (`pipeline.run_stages`) and leaves
their record among the instance's pending ones. `record_pending` then runs, for each run of
the record, the same job on the same partition with the same run config and run id, tagged
as launched by the command line, whose steps return what the command's stages wrote instead
of doing the work again (`SuiteResource.replay`): the instance holds the same runs,
materializations, data versions, checks and lineage as if the jobs had run in it, and no
model is asked anything. Records are written in the order the commands ran them, one
process at a time, and a record is removed once every run of it is in the instance (a run
already there is not recorded twice); one that cannot be recorded (its suite folder gone, or
its definitions no longer loading) is kept beside them as `<name>.failed`, its error in the
log, and the others are recorded.

The command starts `python -m eval_pipeline.defs.record HOME` on its own and does not wait
for it; `eval-pipeline ui` and `eval-pipeline warehouse` record what is pending before they
start.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg

from eval_pipeline.defs import (
    EVALUATE_JOB,
    INPUTS_JOB,
    LAUNCHED_BY_TAG,
    REPORT_JOB,
    build_definitions,
)
from eval_pipeline.defs.evaluate import sigterm_kept
from eval_pipeline.defs.instance import DAGSTER_HOME_ENV, open_instance
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import add_models, model_day_key
from eval_pipeline.defs.watch import observe_suite_files
from eval_pipeline.pipeline import pending_records
from eval_pipeline.store import file_lock

__all__ = ["RECORDED_TAG", "record_pending"]

#: On every run recorded from a command's evaluation: when the command did the work (UTC,
#: ISO 8601); the run itself took only the recording's time.
RECORDED_TAG = "eval_pipeline/evaluated_at"

_JOBS = {"inputs": INPUTS_JOB, "model": EVALUATE_JOB, "report": REPORT_JOB}

logger = logging.getLogger(__name__)


def record_pending(home: Path) -> int:
    """Record every pending record of the instance in `home`, oldest first; how many runs
    were recorded. Waits for another process recording them."""
    os.environ[DAGSTER_HOME_ENV] = str(home)
    recorded = 0
    with file_lock(home / ".record.lock"):
        pending = pending_records(home)
        if not pending:
            return 0
        with open_instance(home, command_line=True) as instance:
            for path in pending:
                try:
                    recorded += _record(instance, path)
                except Exception:
                    # One record that cannot be recorded (its suite gone or no longer
                    # loading) must not hold back the others: it is set aside, named.
                    kept = path.with_suffix(".failed")
                    path.replace(kept)
                    logger.exception(
                        f"the record {path.name} could not be recorded; kept as {kept}"
                    )
                    continue
                path.unlink(missing_ok=True)
    return recorded


def _record(instance: dg.DagsterInstance, path: Path) -> int:
    document = json.loads(path.read_text(encoding="utf-8"))
    day = date.fromisoformat(document["day"])
    root = Path(document["suite_root"])
    defs = build_definitions(root, dbt=False, history=False, include_day=day, replay=str(path))
    add_models(instance, document["models"])
    observe_suite_files(
        instance, {UNNAMED.key(name): version for name, version in document["observed"].items()}
    )
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    evaluated_at = _iso(document["created_at"])
    recorded = 0
    for run in document["runs"]:
        if instance.get_run_by_id(run["run_id"]) is not None:
            continue  # recorded before the record could be removed
        model = run["model"]
        key = model_day_key(model, run["day"]) if model else run["day"]
        run_config = {**quiet, "ops": run["run_config"]} if run["run_config"] else quiet
        with sigterm_kept():
            defs.resolve_job_def(_JOBS[run["kind"]]).execute_in_process(
                instance=instance,
                partition_key=key,
                run_config=run_config,
                run_id=run["run_id"],
                tags={LAUNCHED_BY_TAG: "cli", RECORDED_TAG: evaluated_at},
                raise_on_error=False,
                asset_selection=[UNNAMED.key(name) for name in run["assets"]],
            )
        recorded += 1
    return recorded


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logger.setLevel(logging.INFO)
    home = Path(argv[0])
    count = record_pending(home)
    logger.info(f"{count} run(s) recorded in the Dagster instance {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

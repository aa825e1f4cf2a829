"""An evaluation from the command line, on the Dagster side: the warehouse's dbt build (a suite's first run only), the record of the stages in the instance, and the signals a Dagster run in the process leaves as they were.

The evaluation's stages run in the command's process (`pipeline.run_stages`), and their
record goes into the instance as Dagster records work done outside a run (`defs/record.py`):
`eval-pipeline test` leaves that to its recorder process (`pipeline.Recorder`),
`run_evaluation` records before it returns.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from eval_pipeline.defs import LAUNCHED_BY_TAG, WAREHOUSE_JOB, build_definitions
from eval_pipeline.defs.instance import (
    DAGSTER_HOME_ENV,
    instance_home,
    open_instance,
)
from eval_pipeline.defs.record import record_pending
from eval_pipeline.pipeline import (
    EvaluationRequest,
    EvaluationResult,
    StageFailed,
    queued_unserved,
    run_stages,
)
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, SuiteConfig, first_line

__all__ = [
    "EvaluationFailed",
    "EvaluationRequest",
    "build_missing_warehouse",
    "build_warehouse",
    "run_evaluation",
    "sigterm_kept",
]


class EvaluationFailed(Exception):
    """A stage of the pipeline failed (not a test: the machinery); the message says which.
    `details` (Dagster's error with its stack) belong in a log, not on a terminal."""

    def __init__(self, message: str, *, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details


def _root_cause(error) -> Any:
    while getattr(error, "cause", None) is not None:
        error = error.cause
    return error


def _require(result: dg.ExecuteInProcessResult, what: str) -> None:
    if result.success:
        return
    failures = [event for event in result.all_events if event.is_step_failure]
    detail, details = "", None
    if failures:
        error = failures[0].step_failure_data.error
        if error is not None:
            details = error.to_string()
            # Dagster wraps the step's exception; the innermost one says what went wrong.
            cause = first_line(_root_cause(error).message or "")
            detail = f": {cause}" if cause else ""
    raise EvaluationFailed(
        f"{what} failed{detail} (Dagster run {result.run_id}: eval-pipeline ui)",
        details=details,
    )


@contextlib.contextmanager
def sigterm_kept() -> Iterator[None]:
    """Keep this process's SIGTERM disposition across a Dagster run in it. When the run
    ends, Dagster maps SIGTERM onto SIGINT's disposition, which a command started in a
    shell's background has ignored: the command would then ignore the SIGTERM that stops
    it. Signals belong to the main thread alone; other threads leave them as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, kept)


def build_warehouse(config: SuiteConfig) -> bool:
    """Build the suite's warehouse by materializing its dbt assets in the suite's instance;
    True when it was built (dbt's output goes to the terminal, as `dbt build` shows it)."""
    home = instance_home(config)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    job = build_definitions(config.root, history=False).resolve_job_def(WAREHOUSE_JOB)
    with open_instance(home) as instance, sigterm_kept():
        return job.execute_in_process(
            instance=instance, raise_on_error=False, tags={LAUNCHED_BY_TAG: "cli"}
        ).success


def build_missing_warehouse(config: SuiteConfig, on_stage: Callable[[str], None]) -> bool:
    """Build the suite's warehouse with its dbt project when the warehouse file is missing
    (a suite's first run), dbt's output in the state folder's log; True when it was built.
    The command line asks `WarehouseConfig.to_build` before it imports Dagster for this.

    Raises:
        EvaluationFailed: the build failed; the message names the log and the Dagster run.
    """
    if config.warehouse is None or not config.warehouse.to_build:
        return False
    # The instance is opened from its folder: `$DAGSTER_HOME` stays as the user left it (a
    # command reads it to know whether the user named an instance).
    home = instance_home(config)
    log = StateFolder(config.state_path).logs_dir / "warehouse-build.log"
    on_stage(f"building the warehouse with dbt, first run only (log: {log})")
    log.parent.mkdir(parents=True, exist_ok=True)
    job = build_definitions(config.root, history=False).resolve_job_def(WAREHOUSE_JOB)
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    # dagster-dbt echoes dbt's output to stdout; it belongs in a log, not the report.
    with (
        open(log, "w", encoding="utf-8") as handle,
        contextlib.redirect_stdout(handle),
        open_instance(home, command_line=True) as instance,
        sigterm_kept(),
    ):
        executed = job.execute_in_process(
            instance=instance,
            run_config=quiet,
            tags={LAUNCHED_BY_TAG: "cli"},
            raise_on_error=False,
        )
    _require(executed, f"the warehouse build (see {log})")
    return True


def run_evaluation(
    suite: Suite,
    request: EvaluationRequest,
    *,
    on_stage: Callable[[str], None] = lambda _: None,
) -> EvaluationResult:
    """What `eval-pipeline test` runs, with its record in the instance before this returns:
    the warehouse built if missing, the stages in this process (`run_stages`), then their
    runs recorded in the suite's instance (`record_pending`; the command leaves that to a
    process of its own).

    Raises:
        EvaluationFailed: the warehouse build or a stage failed; the message names it and
            its Dagster run, which is recorded as failed.
    """
    home = instance_home(suite.config)
    try:
        build_missing_warehouse(suite.config, on_stage)
        result = run_stages(suite, request, home, on_stage=on_stage)
    except StageFailed as error:
        raise EvaluationFailed(str(error), details=error.details) from error
    finally:
        record_pending(home)
    if notice := queued_unserved(home):
        result.notices.append(notice)
    return result

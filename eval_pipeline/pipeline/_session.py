"""One evaluation as a command runs it, with the processes it needs: the models' worker processes, the Dagster recorder, the warehouse build; the command calls `evaluate` and renders what it returns.

A command opens an `EvaluationSession` before it starts a thread of its own (a terminal's
status line): the workers and the recorder are forked then, from a process whose only thread
is its main one (a fork copies no other thread's locks). `evaluate` runs the evaluation
(`pipeline.evaluate`, with the stages in this process, `run_stages`); closing the session
ends the workers no model used and has the recorder write the stages' record, or dismisses it
when no stage ran. What knows Dagster (building the dbt warehouse, recording in an instance)
is the `Orchestrator` the caller hands in: this layer never imports Dagster.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import Protocol

from eval_pipeline.pipeline._dagster_home import DAGSTER_HOME_ENV, instance_home, queued_unserved
from eval_pipeline.pipeline._direct import prepare_model_workers, run_stages
from eval_pipeline.pipeline._evaluate import Evaluation, evaluate, planned_attempts
from eval_pipeline.pipeline._evaluation import EvaluationRequest, EvaluationResult, require_day
from eval_pipeline.pipeline._model_processes import dismiss_workers
from eval_pipeline.pipeline._progress import Listener, subscribe
from eval_pipeline.pipeline._recorder import Recorder
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, SuiteConfig, ThresholdMode

__all__ = ["RECORD_LOG", "EvaluationSession", "Orchestrator"]

#: The log of the recorders, in the state folder's logs.
RECORD_LOG = "eval-pipeline-record.log"


class Orchestrator(Protocol):
    """What the layer that knows Dagster does for an evaluation; both are called only when
    they are needed (Dagster takes seconds to import)."""

    def build_missing_warehouse(self, config: SuiteConfig, on_stage: Callable[[str], None]) -> None:
        """Build the suite's dbt warehouse when it is missing or stale; raises `StageFailed`."""
        ...

    def ready_to_record(self, home: Path, suite_root: Path, day: date) -> Callable[[], int]:
        """In the recorder, while the stages run: load what recording takes; the function
        that records what is pending in `home`."""
        ...


class EvaluationSession:
    """One evaluation with its processes (see the module's docstring)."""

    def __init__(self, suite: Suite, request: EvaluationRequest, orchestrator: Orchestrator):
        # A day that cannot hold results is refused before any process is forked.
        require_day(request.run_date)
        self.suite, self.request, self._orchestrator = suite, request, orchestrator
        self._recorder: Recorder | None = None
        self._workers = False  # whether models' partitions run in worker processes
        self._ran = False  # whether stages ran: their record is pending
        # An instance the user named (shared with a deployment, or in a container that ends
        # with the command) holds the record when the command ends: nothing waits for a
        # next command there. Read before anything of this command could set it.
        self._wait = DAGSTER_HOME_ENV in os.environ
        #: Said once the session is closed (the record could not be written).
        self.warnings: list[str] = []

    def __enter__(self) -> EvaluationSession:
        self._workers = prepare_model_workers(self.suite, self.request)
        # Only named: the stages create it (a command refused before them leaves none).
        home = instance_home(self.suite.config, create=False)
        log = StateFolder.of(self.suite.config).logs_dir / RECORD_LOG
        root, day, orchestrator = self.suite.root, self.request.run_date, self._orchestrator
        self._recorder = Recorder.fork(
            home, log, lambda: orchestrator.ready_to_record(home, root, day)
        )
        return self

    @property
    def planned_runs(self) -> int:
        """The runs the evaluation plans; under an attempt budget, the runs it may spend
        (its rounds stop sooner once decided)."""
        planned = len(planned_attempts(self.suite, self.request))
        budget = self.request.budget
        return (budget.runs or planned) if budget is not None else planned

    def evaluate(
        self,
        *,
        on_stage: Callable[[str], None],
        on_result: Listener | None = None,
        min_accuracy: float | None = None,
        threshold_mode: ThresholdMode | None = None,
        allow_errors: bool | None = None,
        models_from: str = "--model",
    ) -> Evaluation:
        """`pipeline.evaluate` with the stages in this process; its notices name the runs
        the instance's queue holds with no daemon to start them (`queued_unserved`).
        `on_result` is told of each run and grade as it ends, whichever process made it."""
        unsubscribe = subscribe(on_result) if on_result is not None else None
        try:
            evaluation = evaluate(
                self.suite,
                self.request,
                runner=self._run_stages,
                on_stage=on_stage,
                min_accuracy=min_accuracy,
                threshold_mode=threshold_mode,
                allow_errors=allow_errors,
                models_from=models_from,
            )
        finally:
            if unsubscribe is not None:
                unsubscribe()
        # Whether or not stages ran: an unchanged rerun is where a user who launched runs
        # from the UI looks next.
        notice = queued_unserved(instance_home(self.suite.config, create=False))
        if notice is None:
            return evaluation
        ran = replace(evaluation.ran, notices=[*evaluation.ran.notices, notice])
        return replace(evaluation, ran=ran)

    def _run_stages(
        self, suite: Suite, request: EvaluationRequest, on_stage: Callable[[str], None]
    ) -> EvaluationResult:
        config = suite.config
        home = instance_home(config)  # created before the recorder reads it
        # The recorder gets ready (its imports of Dagster: 130 MB) while the stages run, on
        # another core; beside worker processes, once the stages are done: the workers and
        # the day's report (its rebuild of results.duckdb) are where memory peaks.
        get_ready = self._recorder.prepare if self._recorder is not None else lambda: None
        if not self._workers:
            get_ready()
        # Nothing but the command's document may reach stdout: stray prints go to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            if config.warehouse is not None and config.warehouse.to_build:
                self._orchestrator.build_missing_warehouse(config, on_stage)
            self._ran = True
            result = run_stages(suite, request, home, on_stage=on_stage)
        if self._workers:
            get_ready()
        return result

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        dismiss_workers()  # forked for models an unchanged rerun did not evaluate
        recorder = self._recorder
        if recorder is None:
            return
        if not self._ran:
            recorder.dismiss()
            return
        recorder.record()
        if self._wait and not recorder.wait():
            self.warnings.append(
                f"the Dagster record of this evaluation was not written (see {recorder.log}); "
                "it waits in the instance's home and `eval-pipeline ui` records it"
            )

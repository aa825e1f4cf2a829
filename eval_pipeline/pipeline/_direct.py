"""An evaluation's stages run in this process, one after another as their assets depend on each other, and the record of what each wrote.

`run_stages` calls the stage functions (`stages.py`) that the assets call: the suite's inputs
and the day's references, each model's runs, grades and summary (the models at the same
time; in a large evaluation those past the first each in a worker process, see
`_model_processes`), then the day's leaderboard and report. It needs no orchestrator, so a
command pays for the work alone. What each stage wrote is kept in a `StageRecord`, run by run as the
pipeline's jobs would have run them; the Dagster layer records that in the suite's instance
afterwards (`defs/record.py`), so the UI shows the same runs, materializations and lineage
as if the jobs had run there.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.pipeline import stages
from eval_pipeline.pipeline._evaluation import EvaluationRequest, EvaluationResult
from eval_pipeline.pipeline._graph import STAGES, JobKind, stages_of
from eval_pipeline.pipeline._loaded_suite import holds_suite, load_suite_once, remember_suite
from eval_pipeline.pipeline._model_processes import (
    WorkerDied,
    dismiss_workers,
    prepare_workers,
    run_in_workers,
    use_workers,
)
from eval_pipeline.pipeline._unchanged import LastEvaluation, LastPartition, planned_runs
from eval_pipeline.store import StateFolder, ensure_schema_files
from eval_pipeline.suite import (
    AgentContext,
    Suite,
    describe_error,
    first_line,
    load_agent_context,
)

__all__ = [
    "RECORDS_DIR",
    "StageFailed",
    "StageRecord",
    "StageRun",
    "pending_records",
    "run_stages",
    "stage_key",
]

#: Models evaluated at the same time by one command (each keeps its own `threads` runs in
#: flight): they wait on their providers, not on the CPU.
MODELS_AT_ONCE = 4

#: Where, in the Dagster home, the records of commands wait to be recorded in the instance.
RECORDS_DIR = "pending_records"


def stage_key(asset: str, model: str | None = None, day: date | None = None) -> str:
    """How a record names one asset's materialization: the asset and its partition."""
    if model is not None and day is not None:
        return f"{asset}[{model}|{day.isoformat()}]"
    if day is not None:
        return f"{asset}[{day.isoformat()}]"
    return asset


@dataclass
class StageRun:
    """One run of a job as the command made it: what it was, its partition, each asset's
    materialization in order, and the failure that ended it, if one did."""

    kind: JobKind
    day: date
    model: str | None = None
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    assets: list[str] = field(default_factory=list)
    materialized: dict[str, stages.Materialized] = field(default_factory=dict)
    #: (its materialization's `stage_key`, what went wrong) of the stage that failed
    failed: tuple[str, str] | None = None

    def to_document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "day": self.day.isoformat(),
            "model": self.model,
            "run_id": self.run_id,
            "assets": self.assets,
            "materialized": {
                key: stages.to_document(done) for key, done in self.materialized.items()
            },
            "failed": list(self.failed) if self.failed else None,
        }


@dataclass
class StageRecord:
    """What one evaluation of the command did, run by run, and the versions of the suite's
    files it read (what the UI's observation of them says)."""

    suite_root: Path
    day: date
    models: tuple[str, ...]
    observed: dict[str, str] = field(default_factory=dict)
    runs: list[StageRun] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    #: The id of this evaluation, under which its check results are stored.
    evaluation_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def save(self, home: Path) -> Path:
        """Write the record among the home's pending ones (`pending_records`)."""
        folder = home / RECORDS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        document = {
            "suite_root": str(self.suite_root),
            "day": self.day.isoformat(),
            "models": list(self.models),
            "observed": self.observed,
            "created_at": self.created_at,
            "evaluation_id": self.evaluation_id,
            "runs": [run.to_document() for run in self.runs],
        }
        partial = folder / f".{name}.{os.getpid()}"
        partial.write_text(json.dumps(document), encoding="utf-8")
        partial.replace(folder / name)
        return folder / name


def pending_records(home: Path) -> list[Path]:
    """The records not yet in the instance, oldest first."""
    folder = home / RECORDS_DIR
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.glob("*.json") if not path.name.startswith("."))


class StageFailed(RuntimeError):
    """A stage raised: the message names it and what went wrong, `details` is the stack
    trace (for a log)."""

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent back from a model's worker process (`_model_processes`) with its details.
        return (_stage_failed, (str(self), self.details))


def _stage_failed(message: str, details: str) -> StageFailed:
    return StageFailed(message, details=details)


def run_stages(
    suite: Suite,
    request: EvaluationRequest,
    home: Path,
    *,
    on_stage: Callable[[str], None] = lambda _: None,
) -> EvaluationResult:
    """Run the request's stages on `suite` in this process: the inputs (unless a later
    round of an attempt budget), each model's partition, the report; what they did. Their
    record is left among the pending ones of the Dagster home `home` (`pending_records`),
    a failed run's too, for the Dagster layer to record in the instance. Each stage reads
    `suite`, and fails once its files change (`SuiteChanged`): an edit while they run
    would grade a mix of two suites.

    Raises:
        StageFailed: a stage failed; nothing after it ran.
    """
    record = StageRecord(suite_root=suite.root, day=request.run_date, models=request.models)
    failed = True
    try:
        result = _run(suite, request, home, record, on_stage)
        failed = False
        return result
    finally:
        dismiss_workers()  # forked for partitions that did not run (unchanged, a failure)
        if record.runs:
            # After a failure, the failure is what the user must read: a record that cannot
            # be saved as well (the same full disk) costs the Dagster view of a failed
            # evaluation, whose results the store keeps.
            with contextlib.suppress(OSError) if failed else contextlib.nullcontext():
                record.save(home)


def _run(
    suite: Suite,
    request: EvaluationRequest,
    home: Path,
    record: StageRecord,
    on_stage: Callable[[str], None],
) -> EvaluationResult:
    config = suite.config
    k = request.k or config.test.k
    selected = _selected(suite, request)
    # Several models' partitions of a large evaluation each in a process of their own,
    # forked now, before this process starts a thread (unless its caller did already).
    workers = _prepare_workers(request, selected)
    digest = remember_suite(suite)
    layout = StateFolder.of(config)
    ensure_schema_files(layout)
    day = request.run_date
    context = load_agent_context(config)
    record.observed = {"test_files": suite.hash, "context_files": context.hash}
    # What this evaluation saw, kept once it ends with every planned run graded, so an
    # unchanged rerun answers from the store (`evaluate` asks).
    last = LastEvaluation(suite, request, home)
    last.forget()
    last.capture()

    def current() -> Suite:
        return load_suite_once(suite.root, launched=digest)

    def stage(run: StageRun, asset: str, work: Callable[[], stages.Materialized]) -> None:
        _stage(run, asset, day, work)

    result = EvaluationResult()
    inputs: StageRun | None = None
    if request.budget_round < 2:  # a budget's later rounds: its first read the inputs
        on_stage(_RUN_NAMES["inputs"])
        inputs = StageRun("inputs", day)
        record.runs.append(inputs)
        work = {
            "test_cases": lambda: stages.test_cases(current(), layout),
            "agent_context": lambda: stages.agent_context(load_agent_context(config)),
            "grading_rules": lambda: stages.grading_rules(current().config),
            "reference_results": lambda: stages.reference_results(current(), day, layout),
            "warehouse_variants": lambda: stages.warehouse_variants(current(), layout),
        }
        for declared in stages_of("inputs"):
            stage(inputs, declared.asset, work[declared.asset])

    # What each model's partition reads besides the store, when this command read it: a
    # partition whose last evaluation read the same, and left nothing to do, is skipped.
    read = (
        LastPartition.digest({key: done.data_version for key, done in inputs.materialized.items()})
        if inputs is not None
        else None
    )
    evaluated: list[str] = []
    for model in request.models:
        planned = planned_runs(suite, model, k, attempts=request.attempts_of(model))
        last_partition = LastPartition(home, model, day)
        if read is None or not last_partition.unchanged(request, config, planned, read):
            last_partition.forget()
            evaluated.append(model)
            continue
        # Reused as the results show them: the selected tests' runs.
        reused = selected[model]
        on_stage(f"{model}: its inputs are unchanged, {reused} stored run(s) reused")
        result.reused += reused

    in_workers = workers and len(evaluated) > 1
    for index, model in enumerate(evaluated):
        where = " in a process of its own" if in_workers and index > 0 else ""
        on_stage(_RUN_NAMES["model"].format(model=model) + where)
    jobs = [
        _ModelJob(
            run=StageRun("model", day, model),
            model=model,
            suite=suite,
            digest=digest,
            request=request,
            home=home,
            layout=layout,
            context=context,
            read=read,
            environment=dict(os.environ) if in_workers else {},
        )
        for model in evaluated
    ]
    first = len(record.runs)
    record.runs.extend(job.run for job in jobs)
    if in_workers:
        outcomes = run_in_workers(jobs, MODELS_AT_ONCE, died=_ModelJob.died)
        # A worker filled in a copy of its job's run.
        record.runs[first:] = [run for run, _ in outcomes]
    else:
        with ThreadPoolExecutor(max(1, min(len(jobs), MODELS_AT_ONCE))) as pool:
            outcomes = list(pool.map(_ModelJob.evaluate, jobs))
    for _, failure in outcomes:
        if failure is not None:
            raise failure
    done = [run for run, _ in outcomes]
    for run in done:
        runs = run.materialized[stage_key("agent_runs", run.model, day)].metadata
        result.run_ids.append(run.run_id)
        result.executed += int(runs["executed"])
        result.reused += int(runs["reused"])
        grades = run.materialized[stage_key("grades", run.model, day)].metadata
        result.add_causes(runs["reruns"].value, grades["regraded"].value)
        for asset in ("agent_runs", "grades"):
            metadata = run.materialized[stage_key(asset, run.model, day)].metadata
            paced = [line for line in metadata["rate_limits"].value if line not in result.notices]
            result.notices += paced
    on_stage(_RUN_NAMES["report"])
    report = StageRun("report", day)
    record.runs.append(report)
    work = stages.report_work(layout, day)
    for declared in stages_of("report"):
        stage(report, declared.asset, work[declared.asset])
    last.save()
    return result


def _selected(suite: Suite, request: EvaluationRequest) -> dict[str, int]:
    """Per model of `request`, the runs its selection plans."""
    k = request.k or suite.config.test.k
    return {
        model: planned_runs(suite, model, k, request.select, request.attempts_of(model))
        for model in request.models
    }


def prepare_model_workers(suite: Suite, request: EvaluationRequest) -> bool:
    """Fork the worker processes of the request's models now, if `run_stages` will use
    some; whether it will. A caller about to start a thread (a terminal's status line)
    calls this first, as a worker is forked from a process whose only thread is its main
    one. `run_stages` dismisses the workers it did not use; a caller that then does not run
    the stages (an unchanged rerun) calls `dismiss_workers`."""
    return _prepare_workers(request, _selected(suite, request))


def _prepare_workers(request: EvaluationRequest, selected: dict[str, int]) -> bool:
    """Whether the request's models past the first run in worker processes (by the runs
    they plan, `selected`); if so, the workers are prepared (`prepare_workers`)."""
    workers = use_workers(len(request.models), sum(selected.values()))
    if workers:
        prepare_workers(len(request.models) - 1)
    return workers


def _stage(run: StageRun, asset: str, day: date, work: Callable[[], stages.Materialized]) -> None:
    """Run one stage of `run` and keep its materialization (or its failure) in `run`.

    Raises:
        StageFailed: the stage raised; `run.failed` names it.
    """
    key = stage_key(asset, run.model, day if asset not in _UNPARTITIONED else None)
    run.assets.append(asset)
    try:
        run.materialized[key] = work()
    except Exception as error:
        cause = first_line(describe_error(error))
        raise _failed(run, key, cause, details=traceback.format_exc()) from error


def _failed(run: StageRun, key: str, cause: str, *, details: str = "") -> StageFailed:
    """Mark `run` failed at the materialization `key`; the error that says so."""
    run.failed = (key, cause)
    what = _RUN_NAMES[run.kind].format(model=run.model)
    return StageFailed(f"{what} failed: {cause}", details=details)


@dataclass(frozen=True)
class _ModelJob:
    """One model's partition of the day: its runs, grades and summary, in this process or
    in a worker of its own (`_model_processes`), which gets this job pickled."""

    #: what the partition's stages wrote, filled in as they run
    run: StageRun
    model: str
    suite: Suite
    #: the suite's files as the evaluation was launched with them (`remember_suite`)
    digest: str
    request: EvaluationRequest
    home: Path
    layout: StateFolder
    context: AgentContext
    #: what the partition read besides the store (`LastPartition.digest`); None: unknown
    read: str | None
    #: the command's environment, for a worker (the server it is forked from may be older)
    environment: dict[str, str]

    def evaluate(self) -> tuple[StageRun, StageFailed | None]:
        """The partition's run, and the failure that ended it (None: it completed)."""
        if self.environment and os.environ != self.environment:
            os.environ.clear()
            os.environ.update(self.environment)
        if not holds_suite(self.suite.root):
            remember_suite(self.suite)  # in a worker: the suite the command loaded
        request, model, day, layout = self.request, self.model, self.request.run_date, self.layout
        options, run = _run_options(request, model), self.run

        def current() -> Suite:
            return load_suite_once(self.suite.root, launched=self.digest)

        work = stages.model_work(
            current,
            model,
            day,
            layout,
            self.context,
            options=options,
            rejudge=request.rejudge,
            rejudge_samples=request.rejudge_samples,
        )
        try:
            for declared in stages_of("model"):
                _stage(run, declared.asset, day, work[declared.asset])
        except StageFailed as failure:
            return run, failure
        if self.read is not None:
            runs = run.materialized[stage_key("agent_runs", model, day)].metadata
            plain = {
                key: value for key, value in runs.items() if not isinstance(value, stages.Value)
            }
            LastPartition(self.home, model, day).save(self.read, plain)
        return run, None

    def died(self, error: WorkerDied) -> tuple[StageRun, StageFailed]:
        """The outcome of a worker that ended without sending this job's back: its
        partition failed in its runs."""
        self.run.assets.append("agent_runs")
        key = stage_key("agent_runs", self.model, self.request.run_date)
        return self.run, _failed(self.run, key, str(error))


def _run_options(request: EvaluationRequest, model: str) -> stages.RunOptions:
    return stages.RunOptions(
        select=request.select,
        no_cache=request.no_cache,
        recording=request.recording,
        k=request.k,
        attempts=request.attempts_of(model),
        threads=request.threads,
        budget_round=request.budget_round,
    )


#: The assets of no partition: the suite's inputs, read whatever the day.
_UNPARTITIONED = frozenset(declared.asset for declared in STAGES if declared.partitioning == "none")

_RUN_NAMES: dict[JobKind, str] = {
    "inputs": "reading the suite and running the reference SQL",
    "model": "evaluating {model}",
    "report": "writing the leaderboard and report",
}

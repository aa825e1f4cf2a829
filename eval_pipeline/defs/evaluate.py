"""An evaluation through the Dagster pipeline, in the order its assets need, recorded in the suite's instance."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg

from eval_pipeline.defs import (
    EVALUATE_ASSETS,
    EVALUATE_JOB,
    INPUTS_JOB,
    LAUNCHED_BY_TAG,
    REPORT_ASSETS,
    REPORT_JOB,
    SUITE_ASSETS,
    WAREHOUSE_JOB,
    build_definitions,
)
from eval_pipeline.defs.assets.suite import file_versions
from eval_pipeline.defs.instance import (
    DAGSTER_HOME_ENV,
    instance_home,
    open_instance,
    share_log_handlers,
    waiting_on_a_daemon,
)
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import add_models, model_day_key
from eval_pipeline.defs.unchanged import Freshness
from eval_pipeline.defs.watch import observe_suite_files
from eval_pipeline.pipeline import (
    EvaluationRequest,
    EvaluationResult,
    LastEvaluation,
    partition_unchanged,
    planned_runs,
    require_day,
)
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import (
    Suite,
    SuiteConfig,
    SuiteError,
    describe_error,
    first_line,
    load_agent_context,
)

__all__ = [
    "EvaluationFailed",
    "EvaluationRequest",
    "EvaluationResult",
    "build_warehouse",
    "require_day",
    "run_evaluation",
]

# Models evaluated at the same time by one command, as the instance caps concurrent runs
# (max_concurrent_runs in eval_pipeline/dagster.yaml).
MODELS_AT_ONCE = 4


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
def _sigterm_kept() -> Iterator[None]:
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
    with open_instance(home) as instance, _sigterm_kept():
        return job.execute_in_process(
            instance=instance, raise_on_error=False, tags={LAUNCHED_BY_TAG: "cli"}
        ).success


def _models_at_once(models: int) -> int:
    """How many models' partitions run at the same time: all of them, up to the instance's
    cap on concurrent runs (each model keeps its own `threads` runs in flight)."""
    return max(1, min(models, MODELS_AT_ONCE))


def _unchanged(
    freshness: Freshness,
    request: EvaluationRequest,
    config: SuiteConfig,
    model: str,
    planned: int,
) -> bool:
    """Whether the partition's evaluation would reuse every stored run and run nothing, so
    its Dagster run need not happen: the half that needs Dagster, whether its runs, grades
    and summary are fresh and what its last runs materialization recorded, handed to
    `partition_unchanged` (pipeline/_unchanged.py, which owns skipping what did not change).
    The results file is written from the store either way.
    """
    key = model_day_key(model, request.run_date.isoformat())
    fresh = freshness.fresh(EVALUATE_ASSETS, key)
    last_runs = freshness.latest_metadata("agent_runs", key) if fresh else None
    return partition_unchanged(request, config, model, planned, last_runs=last_runs)


def run_evaluation(
    suite: Suite,
    request: EvaluationRequest,
    *,
    on_stage: Callable[[str], None] = lambda _: None,
) -> EvaluationResult:
    """Materialize, for the requested day: the suite inputs, the warehouse if missing, the
    reference results, each model's runs → grades → summaries (the models at the same time),
    then the leaderboard and report — each stage a run of its named job in the suite's
    instance (so it shows in the UI), tagged as launched by the CLI.

    Args:
        suite: the loaded suite (its config names the instance, the warehouse and the store);
            every stage grades this one, none reads the test files again.
        request: models, day and options, already checked.
        on_stage: told the name of each step as it starts (progress on a terminal).

    Raises:
        EvaluationFailed: a step failed, or Dagster could not record a run; the message
            names the step and the Dagster run or instance. A suite whose files changed
            while the stages ran fails the next stage so, its message naming the folder
            and saying to run again (`SuiteChanged`).
    """
    config = suite.config
    home = instance_home(config)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    # What this evaluation saw (its inputs once the warehouse is built), kept once it ends
    # with every planned run graded, so an unchanged rerun answers from the store without
    # Dagster (the CLI asks).
    last = LastEvaluation(suite, request, home)
    last.forget()
    warehouse = config.warehouse
    build = (
        warehouse is not None and warehouse.dbt_project is not None and not warehouse.path.exists()
    )
    # The dbt assets (dagster_dbt, a manifest) only when the warehouse is built: an evaluation
    # depends on the warehouse models by their keys alone, and never builds the history marts.
    # Its runs read `suite`, the one the command loaded and checked, and fail once its files
    # change (an edit while they run would have them grade a mix of two suites).
    defs = build_definitions(
        suite.root, dbt=build, history=False, include_day=request.run_date, suite=suite
    )
    day = request.run_date.isoformat()
    result = EvaluationResult()
    # Each step's events go to the instance (the UI); the terminal shows our own progress,
    # and a failed step our one line naming it and the log file: at CRITICAL the console
    # logger keeps Dagster's ERROR event (a full stack trace) off the terminal.
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    tags = {LAUNCHED_BY_TAG: "cli"}
    stage = ["opening the Dagster instance"]
    try:
        with open_instance(home, command_line=True) as instance:

            def step(what, job, partition_key=None, ops=None, assets=None):
                stage[0] = what
                run_config = {**quiet, "ops": ops} if ops else quiet
                with _sigterm_kept():
                    executed = defs.resolve_job_def(job).execute_in_process(
                        instance=instance,
                        partition_key=partition_key,
                        run_config=run_config,
                        tags=tags,
                        raise_on_error=False,
                        asset_selection=[UNNAMED.key(n) for n in assets] if assets else None,
                    )
                _require(executed, what)
                return executed

            add_models(instance, request.models)
            notice = waiting_on_a_daemon(instance, home)
            if notice:
                result.notices.append(notice)
            if build:
                assert warehouse is not None
                log = StateFolder(config.state_path).logs_dir / "warehouse-build.log"
                on_stage(f"building the warehouse with dbt, first run only (log: {log})")
                log.parent.mkdir(parents=True, exist_ok=True)
                # dagster-dbt echoes dbt's output to stdout; it belongs in a log, not the report.
                with open(log, "w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
                    step(f"the warehouse build (see {log})", WAREHOUSE_JOB)
            last.capture()
            # One run reads the suite and runs the day's references, and brings the variants
            # of semantic checks up to date (reused when built; nothing to build without such
            # a check), so the command leaves no input of the grades unsynced: the suite's
            # files and the warehouse may have changed however the store looks, so this run
            # always happens.
            inputs = [*SUITE_ASSETS, "reference_results", "warehouse_variants"]
            if request.budget_round < 2:  # a budget's later rounds: its first read them
                on_stage("reading the suite and running the reference SQL")
                # The files as this run reads them, observed first: what read them is then
                # never older than the sources in the UI.
                observe_suite_files(
                    instance, file_versions(suite, load_agent_context(config), UNNAMED)
                )
                step(
                    "reading the suite and running the reference SQL",
                    INPUTS_JOB,
                    day,
                    assets=inputs,
                )
            agent_config = {
                "select": list(request.select),
                "no_cache": request.no_cache,
                "record": request.recording,  # AgentRunsConfig.record, a run config key
                "k": request.k,
                "threads": request.threads,
                "budget_round": request.budget_round,
            }
            freshness = Freshness(defs, instance)
            k = request.k or config.test.k
            evaluated, unchanged = [], []
            for model in request.models:
                planned = planned_runs(suite, model, k, attempts=request.attempts_of(model))
                if not _unchanged(freshness, request, config, model, planned):
                    on_stage(f"evaluating {model}")
                    evaluated.append(model)
                    continue
                # Reused as the results show them: the selected tests' runs.
                reused = planned_runs(suite, model, k, request.select, request.attempts_of(model))
                on_stage(f"{model}: its inputs are unchanged, {reused} stored run(s) reused")
                unchanged.append(model)
                result.reused += reused

            def evaluate(model: str) -> dg.ExecuteInProcessResult:
                return step(
                    f"evaluating {model}",
                    EVALUATE_JOB,
                    model_day_key(model, day),
                    ops={
                        "agent_runs": {
                            "config": {**agent_config, "attempts": request.attempts_of(model)}
                        },
                        "grades": {
                            "config": {
                                "rejudge": request.rejudge,
                                "rejudge_samples": request.rejudge_samples,
                            }
                        },
                    },
                )

            # Each model's partition is its own run; they wait on the provider, not the CPU,
            # so they run at once in threads (the store locks per model and day).
            share_log_handlers(instance)
            with ThreadPoolExecutor(_models_at_once(len(evaluated))) as pool:
                done = list(pool.map(evaluate, evaluated))
            for executed in done:
                result.run_ids.append(executed.run_id)
                for event in executed.get_asset_materialization_events():
                    if event.asset_key == UNNAMED.key("agent_runs"):
                        metadata = event.materialization.metadata
                        result.executed += int(metadata["executed"].value)
                        result.reused += int(metadata["reused"].value)
                        result.answerer_changed += int(metadata["answerer_changed"].value)
            if evaluated or not freshness.fresh(REPORT_ASSETS, day):
                on_stage("writing the leaderboard and report")
                step("writing the leaderboard and report", REPORT_JOB, day)
            last.save()
    except (EvaluationFailed, SuiteError):
        raise
    except Exception as error:
        # Not a failed step (those are EvaluationFailed): Dagster itself could not record the
        # run, e.g. its event log on a full disk. Name the stage and the instance.
        raise EvaluationFailed(
            f"{stage[0]} failed: {describe_error(error)} (Dagster instance {home})"
        ) from error
    return result

"""An evaluation through the Dagster pipeline, in the order its assets need, recorded in the suite's instance."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from datetime import date
from typing import Any

import dagster as dg

from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions, materialize
from eval_pipeline.defs.instance import DAGSTER_HOME_ENV, instance_home, open_instance
from eval_pipeline.defs.partitions import add_models, model_day_key, today
from eval_pipeline.pipeline import EvaluationRequest, EvaluationResult
from eval_pipeline.store import StoreLayout
from eval_pipeline.suite import Problem, Suite, SuiteConfig, SuiteError, describe_error, first_line

__all__ = [
    "EvaluationFailed",
    "EvaluationRequest",
    "EvaluationResult",
    "build_warehouse",
    "check_day",
    "run_evaluation",
]


class EvaluationFailed(Exception):
    """A stage of the pipeline failed (not a test: the machinery); the message says which.
    `details` (Dagster's error with its stack) belong in a log, not on a terminal."""

    def __init__(self, message: str, *, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details


def check_day(run_date: date) -> None:
    """Refuse a day after today (UTC). An earlier day than the history's first is fine: its
    evaluation extends the daily partitions back to it (`build_definitions(include_day=…)`)."""
    if run_date > today():
        raise SuiteError(
            [
                Problem(
                    "--date",
                    None,
                    f"{run_date.isoformat()} is in the future; the last day that can be "
                    f"evaluated is today, {today().isoformat()} (UTC)",
                )
            ],
            headline="bad option; nothing was run",
        )


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


def build_warehouse(config: SuiteConfig) -> bool:
    """Build the suite's warehouse by materializing its dbt assets in the suite's instance;
    True when it was built (dbt's output goes to the terminal, as `dbt build` shows it)."""
    home = instance_home(config)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    job = build_definitions(config.root).get_job_def(WAREHOUSE_JOB)
    with open_instance(home) as instance:
        return job.execute_in_process(instance=instance, raise_on_error=False).success


def run_evaluation(
    suite: Suite,
    request: EvaluationRequest,
    *,
    on_stage: Callable[[str], None] = lambda _: None,
) -> EvaluationResult:
    """Materialize, for the requested day: the suite inputs, the warehouse if missing, the
    reference results, each model's runs → grades → summaries, then the leaderboard and
    report — each step a Dagster run in the suite's instance (so it shows in the UI).

    Args:
        suite: the loaded suite (its config names the instance, the warehouse and the store).
        request: models, day and options, already checked.
        on_stage: told the name of each step as it starts (progress on a terminal).

    Raises:
        EvaluationFailed: a step failed, or Dagster could not record a run; the message
            names the step and the Dagster run or instance.
    """
    config = suite.config
    home = instance_home(config)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    defs = build_definitions(suite.root, include_day=request.run_date)
    day = request.run_date.isoformat()
    result = EvaluationResult()
    # Each step's events go to the instance (the UI); the terminal shows our own progress,
    # and a failed step our one line naming it and the log file: at CRITICAL the console
    # logger keeps Dagster's ERROR event (a full stack trace) off the terminal.
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    tags = {"eval_pipeline/source": "cli"}
    stage = ["opening the Dagster instance"]
    try:
        with open_instance(home) as instance:

            def step(what: str, assets: list[str], partition_key=None, ops: dict | None = None):
                stage[0] = what
                on_stage(what)
                run_config = {**quiet, "ops": ops} if ops else quiet
                executed = materialize(
                    defs,
                    assets,
                    instance=instance,
                    partition_key=partition_key,
                    run_config=run_config,
                    tags=tags,
                )
                _require(executed, what)
                return executed

            add_models(instance, request.models)
            warehouse = config.warehouse
            if (
                warehouse is not None
                and warehouse.dbt_project is not None
                and not warehouse.path.exists()
            ):
                log = StoreLayout(config.state_path).logs_dir / "warehouse-build.log"
                on_stage(f"building the warehouse with dbt, first run only (log: {log})")
                log.parent.mkdir(parents=True, exist_ok=True)
                job = defs.resolve_job_def(WAREHOUSE_JOB)
                # dagster-dbt echoes dbt's output to stdout; it belongs in a log, not the report.
                with open(log, "w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
                    built = job.execute_in_process(
                        instance=instance, raise_on_error=False, tags=tags, run_config=quiet
                    )
                _require(built, f"the warehouse build (see {log})")
            step("reading the suite", ["test_cases", "agent_context", "judge"])
            step("running the reference SQL", ["reference_results"], partition_key=day)
            if any(case.semantic is not None for case in suite.cases):
                step("building the warehouse variants (reused when built)", ["warehouse_variants"])
            agent_config = {
                "select": list(request.select),
                "no_cache": request.no_cache,
                "record": request.record,
                "k": request.k,
                "threads": request.threads,
            }
            for model in request.models:
                executed = step(
                    f"evaluating {model}",
                    ["agent_runs", "grades", "model_summaries"],
                    partition_key=model_day_key(model, day),
                    ops={
                        "agent_runs": {"config": agent_config},
                        "grades": {
                            "config": {
                                "rejudge": request.rejudge,
                                "rejudge_samples": request.rejudge_samples,
                            }
                        },
                    },
                )
                result.run_ids.append(executed.run_id)
                for event in executed.get_asset_materialization_events():
                    if event.asset_key.to_user_string() == "agent_runs":
                        metadata = event.materialization.metadata
                        result.executed += int(metadata["executed"].value)
                        result.reused += int(metadata["reused"].value)
            step("writing the leaderboard and report", ["leaderboard", "report"], partition_key=day)
    except (EvaluationFailed, SuiteError):
        raise
    except Exception as error:
        # Not a failed step (those are EvaluationFailed): Dagster itself could not record the
        # run, e.g. its event log on a full disk. Name the stage and the instance.
        raise EvaluationFailed(
            f"{stage[0]} failed: {describe_error(error)} (Dagster instance {home})"
        ) from error
    return result

"""An evaluation through the Dagster pipeline, in the order its assets need, recorded in the project's instance."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

import duckdb

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._factory import RECORDINGS_DIR, recording_path
from eval_pipeline.agents._providers import split_model_id
from eval_pipeline.agents._replay import recording_name
from eval_pipeline.cli._exit import CouldNotRun, describe, first_line
from eval_pipeline.cli._instance import DAGSTER_HOME_ENV, instance_home, open_instance
from eval_pipeline.suite import CONFIG_FILE, Case, Problem, Suite, SuiteConfig, SuiteError
from eval_pipeline.suite._config import recording_name_problem

if TYPE_CHECKING:
    import dagster as dg

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


class EvaluationFailed(CouldNotRun):
    """A stage of the pipeline failed (not a test: the machinery); the message says which."""


@dataclass(frozen=True)
class EvaluationRequest:
    """What `eval-pipeline test` asked for, with the config's defaults already applied."""

    models: tuple[str, ...]
    run_date: date
    select: tuple[str, ...] = ()
    k: int | None = None
    threads: int | None = None
    no_cache: bool = False
    record: bool = False
    rejudge: bool = False


@dataclass
class EvaluationOutcome:
    executed: int = 0
    reused: int = 0
    run_ids: list[str] = field(default_factory=list)


def _unknown_model(config: SuiteConfig, model: str, *, judge: bool) -> str | None:
    """Why `model` names nothing configured, or None when it does."""
    if "|" in model:
        return f"{model!r}: a model id may not contain '|'"
    try:
        provider, _ = split_model_id(model)
    except UnknownModel as error:
        return str(error)
    name = recording_name(model)
    if name is not None:
        if (problem := recording_name_problem(model)) is not None:
            return problem
        if recording_path(config, name).exists():
            return None
        folder = config.root / RECORDINGS_DIR
        present = sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []
        known = ", ".join(f"replay:{n}" for n in present) or "(none)"
        return (
            f"{model!r}: no recording {RECORDINGS_DIR}/{name}.jsonl in the suite; "
            f"recordings: {known}"
        )
    if provider == "http":
        if judge:
            return f"{model!r}: a judge is an LLM (provider:model or replay:name), not an agent"
        if config.agent(model.split(":", 1)[1]) is None:
            known = ", ".join(f"http:{a.name}" for a in config.agents) or "(none)"
            return f"{model!r}: no such agent under `agents`; configured: {known}"
        return None
    if config.provider(provider) is None:
        known = ", ".join(p.name for p in config.providers) or "(none)"
        return f"{model!r}: provider {provider!r} is not under llm.providers; configured: {known}"
    return None


def check_models(suite: Suite, models: Sequence[str]) -> None:
    """Refuse model ids (and a `test.judge_model`) that name nothing configured, and an
    evaluation of no model at all, before any work starts."""
    config = suite.config
    problems = [
        Problem("--model", None, reason)
        for model in models
        if (reason := _unknown_model(config, model, judge=False)) is not None
    ]
    if not models:
        problems.append(
            Problem("--model", None, "no model to evaluate: give -m MODEL or list test.models")
        )
    judge = config.test.judge_model
    if judge is not None and (reason := _unknown_model(config, judge, judge=True)) is not None:
        problems.append(Problem(CONFIG_FILE, "test.judge_model", reason))
    if problems:
        raise SuiteError(problems, headline="unknown model(s); nothing was run")


def check_warehouse(suite: Suite, selected: Sequence[Case]) -> None:
    """Find a warehouse the evaluation cannot use before any work starts: a path that is
    missing (with no dbt project to build it) or a folder is a configuration mistake (exit 2);
    a DuckDB file that does not open is damaged or locked: the evaluation cannot run (exit 3)."""
    warehouse = suite.config.warehouse
    if warehouse is None:
        needing = [c.name for c in selected if c.sql is not None]
        if needing:
            shown = ", ".join(needing[:5]) + (", …" if len(needing) > 5 else "")
            raise SuiteError(
                [
                    Problem(
                        CONFIG_FILE, "warehouse", f"no warehouse configured for the SQL of {shown}"
                    )
                ],
                headline="the tests need a warehouse; nothing was run",
            )
        return
    path = warehouse.path
    problem = None
    if path.is_dir():
        problem = f"{path} is a folder, not a DuckDB file"
    elif not path.exists():
        if warehouse.dbt_project is not None:
            return  # built by dbt on the first run
        problem = f"{path} does not exist; fix the path or build the warehouse"
    else:
        with open(path, "rb") as handle:
            header = handle.read(12)
        if header[8:12] != DUCKDB_MAGIC:
            problem = f"{path} is not a DuckDB database"
    if problem:
        raise SuiteError(
            [Problem(CONFIG_FILE, "warehouse.path", problem)],
            headline="the warehouse cannot be used; nothing was run",
        )
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as error:
        raise CouldNotRun(
            f"the warehouse {path} cannot be opened: {first_line(str(error))}"
        ) from None


def check_day(run_date: date) -> None:
    """Refuse a day outside the daily partitions (before 2025-01-01, or after today UTC)."""
    from eval_pipeline.defs.partitions import daily_partitions

    first = daily_partitions.get_first_partition_key()
    last = daily_partitions.get_last_partition_key()
    day = run_date.isoformat()
    if first is None or last is None or not first <= day <= last:
        raise SuiteError(
            [
                Problem(
                    "--date",
                    None,
                    f"{day} is outside the days that can be evaluated, {first} to {last} (today, UTC)",
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


def run_evaluation(
    suite: Suite,
    request: EvaluationRequest,
    *,
    on_stage: Callable[[str], None] = lambda _: None,
) -> EvaluationOutcome:
    """Materialize, for the requested day: the suite inputs, the warehouse if missing, the
    reference results, each model's runs → grades → summaries, then the leaderboard and
    report — each step a Dagster run in the project's instance (so it shows in the UI)."""
    # Dagster and the definitions (dagster-dbt, dbt) take seconds to import: only here, so
    # `list`, `sql`, `diff`, `export` and every usage error answer without paying for them.
    from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions, materialize
    from eval_pipeline.defs.partitions import add_models, model_day_key

    config = suite.config
    home = instance_home(config)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    defs = build_definitions(suite.root)
    day = request.run_date.isoformat()
    outcome = EvaluationOutcome()
    # Each step's events go to the instance (the UI); the terminal shows our own progress.
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    tags = {"eval_pipeline/source": "cli"}
    stage = ["opening the Dagster instance"]
    try:
        with open_instance(home) as instance:

            def step(what: str, assets: list[str], partition_key=None, ops: dict | None = None):
                stage[0] = what
                on_stage(what)
                run_config = {**quiet, "ops": ops} if ops else quiet
                result = materialize(
                    defs,
                    assets,
                    instance=instance,
                    partition_key=partition_key,
                    run_config=run_config,
                    tags=tags,
                )
                _require(result, what)
                return result

            add_models(instance, request.models)
            warehouse = config.warehouse
            if (
                warehouse is not None
                and warehouse.dbt_project is not None
                and not warehouse.path.exists()
            ):
                log = config.state_path / "logs" / "warehouse-build.log"
                on_stage(f"building the warehouse with dbt, first run only (log: {log})")
                log.parent.mkdir(parents=True, exist_ok=True)
                job = defs.resolve_job_def(WAREHOUSE_JOB)
                # dagster-dbt echoes dbt's output to stdout; it belongs in a log, not the report.
                with open(log, "w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
                    result = job.execute_in_process(
                        instance=instance, raise_on_error=False, tags=tags, run_config=quiet
                    )
                _require(result, f"the warehouse build (see {log})")
            step("reading the suite", ["test_cases", "agent_context", "judge"])
            step("running the reference SQL", ["reference_results"], partition_key=day)
            agent_config = {
                "select": list(request.select),
                "no_cache": request.no_cache,
                "record": request.record,
                "k": request.k,
                "threads": request.threads,
            }
            for model in request.models:
                result = step(
                    f"evaluating {model}",
                    ["agent_runs", "grades", "model_summaries"],
                    partition_key=model_day_key(model, day),
                    ops={
                        "agent_runs": {"config": agent_config},
                        "grades": {"config": {"rejudge": request.rejudge}},
                    },
                )
                outcome.run_ids.append(result.run_id)
                for event in result.get_asset_materialization_events():
                    if event.asset_key.to_user_string() == "agent_runs":
                        metadata = event.materialization.metadata
                        outcome.executed += int(metadata["executed"].value)
                        outcome.reused += int(metadata["reused"].value)
            step("writing the leaderboard and report", ["leaderboard", "report"], partition_key=day)
    except (CouldNotRun, SuiteError):
        raise
    except Exception as error:
        # Not a failed step (those are EvaluationFailed): Dagster itself could not record the
        # run, e.g. its event log on a full disk. Name the stage and the instance.
        raise EvaluationFailed(
            f"{stage[0]} failed: {describe(error)} (Dagster instance {home})"
        ) from error
    return outcome

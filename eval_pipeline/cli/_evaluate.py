"""An evaluation through the Dagster pipeline, in the order its assets need, recorded in the project's instance."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._factory import RECORDINGS_DIR, recording_path
from eval_pipeline.agents._providers import split_model_id
from eval_pipeline.agents._replay import recording_name
from eval_pipeline.cli._instance import DAGSTER_HOME_ENV, instance_home
from eval_pipeline.suite import Problem, Suite, SuiteError
from eval_pipeline.suite._config import recording_name_problem

if TYPE_CHECKING:
    import dagster as dg


class EvaluationFailed(RuntimeError):
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


@dataclass
class EvaluationOutcome:
    executed: int = 0
    reused: int = 0
    run_ids: list[str] = field(default_factory=list)


def check_models(suite: Suite, models: Sequence[str]) -> None:
    """Refuse model ids that name nothing configured, before any work starts."""
    config = suite.config
    problems = []
    for model in models:
        if "|" in model:
            problems.append(Problem("--model", None, f"{model!r}: a model id may not contain '|'"))
            continue
        try:
            provider, _ = split_model_id(model)
        except UnknownModel as error:
            problems.append(Problem("--model", None, str(error)))
            continue
        name = recording_name(model)
        if name is not None:
            if (problem := recording_name_problem(model)) is not None:
                problems.append(Problem("--model", None, problem))
                continue
            if not recording_path(config, name).exists():
                folder = config.root / RECORDINGS_DIR
                present = sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []
                known = ", ".join(f"replay:{n}" for n in present) or "(none)"
                problems.append(
                    Problem(
                        "--model",
                        None,
                        f"{model!r}: no recording {RECORDINGS_DIR}/{name}.jsonl in the suite; "
                        f"recordings: {known}",
                    )
                )
        elif provider == "http":
            if config.agent(model.split(":", 1)[1]) is None:
                known = ", ".join(f"http:{a.name}" for a in config.agents) or "(none)"
                problems.append(
                    Problem(
                        "--model",
                        None,
                        f"{model!r}: no such agent under `agents`; configured: {known}",
                    )
                )
        elif config.provider(provider) is None:
            known = ", ".join(p.name for p in config.providers) or "(none)"
            problems.append(
                Problem(
                    "--model",
                    None,
                    f"{model!r}: provider {provider!r} is not under llm.providers; configured: {known}",
                )
            )
    if problems:
        raise SuiteError(problems, headline="unknown model(s); nothing was run")


def _require(result: dg.ExecuteInProcessResult, what: str) -> None:
    if result.success:
        return
    failures = [event for event in result.all_events if event.is_step_failure]
    detail = ""
    if failures:
        error = failures[0].step_failure_data.error
        detail = ": " + (error.message.strip().splitlines()[-1] if error and error.message else "")
    raise EvaluationFailed(
        f"{what} failed{detail} (see the run in the Dagster UI: eval-pipeline ui)"
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
    import dagster as dg

    from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions, materialize
    from eval_pipeline.defs.partitions import model_day_key, models_partitions

    config = suite.config
    os.environ[DAGSTER_HOME_ENV] = str(instance_home(config))
    defs = build_definitions(suite.root)
    day = request.run_date.isoformat()
    outcome = EvaluationOutcome()
    # Each step's events go to the instance (the UI); the terminal shows our own progress.
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    tags = {"eval_pipeline/source": "cli"}
    with dg.DagsterInstance.get() as instance:

        def step(what: str, assets: list[str], partition_key=None, ops: dict | None = None):
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

        known = set(instance.get_dynamic_partitions(models_partitions.name))
        missing = [m for m in request.models if m not in known]
        if missing:
            instance.add_dynamic_partitions(models_partitions.name, missing)
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
        step("reading the suite", ["test_cases", "agent_context"])
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
                ops={"agent_runs": {"config": agent_config}},
            )
            outcome.run_ids.append(result.run_id)
            for event in result.get_asset_materialization_events():
                if event.asset_key.to_user_string() == "agent_runs":
                    metadata = event.materialization.metadata
                    outcome.executed += int(metadata["executed"].value)
                    outcome.reused += int(metadata["reused"].value)
        step("writing the leaderboard and report", ["leaderboard", "report"], partition_key=day)
    return outcome

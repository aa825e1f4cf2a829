"""What `eval-pipeline test` checks before any work starts: the models and the warehouse."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._factory import RECORDINGS_DIR, recording_path
from eval_pipeline.agents._providers import split_model_id
from eval_pipeline.agents._replay import recording_name
from eval_pipeline.cli._exit import CouldNotRun
from eval_pipeline.suite import (
    CONFIG_FILE,
    Case,
    Problem,
    Suite,
    SuiteConfig,
    SuiteError,
    first_line,
)
from eval_pipeline.suite._config import recording_name_problem

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


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

"""What `eval-pipeline test` checks of the databases before any work starts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import duckdb

from eval_pipeline.cli._exit import CouldNotRun
from eval_pipeline.sandbox import statement_rules
from eval_pipeline.suite import (
    CONFIG_FILE,
    DUCKDB,
    Case,
    DatabaseConfig,
    Problem,
    Suite,
    SuiteError,
    engine_named,
    first_line,
)
from eval_pipeline.warehouses import ConnectionFailed, database_warnings, privileged_role_warning

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def warehouse_warnings(suite: Suite, selected: Sequence[Case]) -> list[str]:
    """Find a database the evaluation cannot use before any work starts: a DuckDB path that is
    missing (with no dbt project to build it) or a folder, a database of another engine that
    does not open (a server that does not answer or refuses the login), or an engine that
    gives the sandbox no statement rules, is a configuration mistake (exit 2); a DuckDB file
    that does not open is damaged or locked: the evaluation cannot run (exit 3). Only the
    databases the selected tests use are checked.

    Returns:
        A warning line per database the tests use that accepts a privileged role
        (`allow_privileged_role`), and each engine's note on a database (`Engine.run_note`,
        e.g. the warehouse a query is billed to), to print on every run.
    """
    config = suite.config
    if not config.databases:
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
        return []
    used = {config.database(case.database) for case in selected} or {config.database()}
    databases = sorted((d for d in used if d is not None), key=lambda d: d.name)
    for database in databases:
        if database.type == DUCKDB:  # built by dbt, or damaged: told apart (exit 2 or 3)
            _check_duckdb_file(database)
    # Each named where it was declared (eval_config.yaml or a nao project's nao_config.yaml).
    problems = [
        database.problem(line)
        for database in databases
        if database.type != DUCKDB
        for line in _engine_problems(database)
    ]
    if problems:
        raise SuiteError(
            problems, headline="a database the tests use cannot be used; nothing was run"
        )
    warnings = [privileged_role_warning(d) for d in databases if d.allow_privileged_role]
    notes = [engine_named(d.type).run_note for d in databases]
    warnings += [note(d) for note, d in zip(notes, databases, strict=True) if note is not None]
    return warnings + _cost_previews(databases, selected, config.database)


def _cost_previews(
    databases: Sequence[DatabaseConfig],
    selected: Sequence[Case],
    database_of: Callable[[str | None], DatabaseConfig | None],
) -> list[str]:
    """The line each engine that can tell the references' cost before running them prints
    (`Engine.cost_preview`), for the references of the selected tests on each database."""
    lines = []
    for database in databases:
        preview = engine_named(database.type).cost_preview
        if preview is None:
            continue
        references = [
            case.sql
            for case in selected
            if case.sql is not None and database_of(case.database) == database
        ]
        try:
            line = preview(database, references)
        except ConnectionFailed as error:  # it opened a moment ago: say so, run anyway
            line = f"no cost estimate: {error.message}"
        if line:
            lines.append(line)
    return lines


def _engine_problems(database: DatabaseConfig) -> list[str]:
    """Why a database of an engine but DuckDB cannot be used: its engine gives the sandbox no
    rules, or it does not open (`database_warnings`)."""
    try:
        statement_rules(database)
    except ConnectionFailed as error:
        return [error.message]
    return database_warnings([database])


def _check_duckdb_file(database: DatabaseConfig) -> None:
    path = database.path
    assert path is not None  # a DuckDB database always has one (suite/_databases.py)
    problem = None
    if path.is_dir():
        problem = f"{path} is a folder, not a DuckDB file"
    elif not path.exists():
        if database.dbt_project is not None:
            return  # built by dbt on the first run
        problem = f"{path} does not exist; fix the path or build the warehouse"
    else:
        with open(path, "rb") as handle:
            header = handle.read(12)
        if header[8:12] != DUCKDB_MAGIC:
            problem = f"{path} is not a DuckDB database"
    if problem:
        raise SuiteError(
            [database.problem(problem, "path")],
            headline="the warehouse cannot be used; nothing was run",
        )
    try:
        duckdb.connect(str(path), read_only=True).close()
    except duckdb.Error as error:
        raise CouldNotRun(
            f"the warehouse {path} cannot be opened: {first_line(str(error))}"
        ) from None

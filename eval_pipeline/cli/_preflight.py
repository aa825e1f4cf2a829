"""What `eval-pipeline test` checks of the databases before any work starts."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from eval_pipeline.cli._exit import CouldNotRun
from eval_pipeline.suite import (
    CONFIG_FILE,
    Case,
    DatabaseConfig,
    Problem,
    Suite,
    SuiteError,
    first_line,
)
from eval_pipeline.warehouses import database_warnings, privileged_role_warning

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def warehouse_warnings(suite: Suite, selected: Sequence[Case]) -> list[str]:
    """Find a database the evaluation cannot use before any work starts: a DuckDB path that is
    missing (with no dbt project to build it) or a folder, or a server that does not answer or
    refuses the login, is a configuration mistake (exit 2); a DuckDB file that does not open
    is damaged or locked: the evaluation cannot run (exit 3). Only the databases the selected
    tests use are checked.

    Returns:
        A warning line per database the tests use that accepts a privileged role
        (`allow_privileged_role`), to print on every run.
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
        if not database.is_server:
            _check_duckdb_file(database)
    # Each named where it was declared (eval_config.yaml or a nao project's nao_config.yaml).
    problems = [
        database.problem(line)
        for database in databases
        if database.is_server
        for line in database_warnings([database])
    ]
    if problems:
        raise SuiteError(
            problems, headline="a database the tests use cannot be used; nothing was run"
        )
    return [privileged_role_warning(d) for d in databases if d.allow_privileged_role]


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

"""What `eval-pipeline test` checks of the warehouse before any work starts."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from eval_pipeline.cli._exit import CouldNotRun
from eval_pipeline.suite import (
    CONFIG_FILE,
    Case,
    Problem,
    Suite,
    SuiteError,
    first_line,
)

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


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

"""Before any agent runs: every database the selected tests use answers, with its schema."""

from __future__ import annotations

from collections.abc import Iterable

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._connect import connect
from eval_pipeline.warehouses._errors import ConnectionFailed

__all__ = ["database_warnings"]


def database_warnings(databases: Iterable[DatabaseConfig]) -> list[str]:
    """One line per database that cannot be used (unreachable, login refused, schema or file
    missing, environment variable unset), naming it and the cause; empty when all answer.

    Meant for `eval-pipeline test` to call before any agent runs, exiting 2 on any line.
    """
    problems = []
    for database in databases:
        try:
            connect(database).close()
        except ConnectionFailed as error:
            problems.append(error.message)
    return problems

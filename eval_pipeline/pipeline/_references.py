"""Reference SQL run on each test's own database: DuckDB files and servers alike."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from eval_pipeline.agents._sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.agents._server_sandbox import ServerSandbox
from eval_pipeline.grading._reference import ReferenceResult, run_references
from eval_pipeline.suite import Case, DatabaseConfig, SuiteConfig

__all__ = ["references_by_database"]


def references_by_database(
    config: SuiteConfig, cases: Sequence[Case], limits: SandboxLimits
) -> list[ReferenceResult]:
    """The reference result of every case with SQL, each run on its `database:` (default: the
    first configured), in the order of `cases`; one sandbox per database, closed after.

    Raises:
        FileNotFoundError: a DuckDB warehouse file is missing (build it first).
        ConnectionFailed: a server cannot be reached or refuses the login.
    """
    with_sql = [case for case in cases if case.sql is not None]
    groups: dict[str, list[Case]] = {}
    databases: dict[str, DatabaseConfig] = {}
    for case in with_sql:
        database = config.database(case.database)
        if database is None:
            what = f"no database {case.database!r} is" if case.database else "no warehouse is"
            raise FileNotFoundError(f"cannot run reference SQL: {what} configured")
        databases[database.name] = database
        groups.setdefault(database.name, []).append(case)
    found: dict[str, ReferenceResult] = {}
    for name, group in groups.items():
        with _sandbox(databases[name], limits) as sandbox:
            found.update((result.name, result) for result in run_references(group, sandbox))
    return [found[case.name] for case in with_sql]


@contextlib.contextmanager
def _sandbox(
    database: DatabaseConfig, limits: SandboxLimits
) -> Iterator[SqlSandbox | ServerSandbox]:
    if database.is_server:
        with ServerSandbox(database, limits) as sandbox:
            yield sandbox
        return
    if database.path is None or not database.path.exists():
        raise FileNotFoundError(
            f"cannot run reference SQL: the warehouse {database.path} does not exist; build it first"
        )
    with SqlSandbox.for_file(database.path, limits=limits) as sandbox:
        yield sandbox

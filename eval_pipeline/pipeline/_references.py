"""The references stage of one day: every test's reference SQL run on its own database (DuckDB files and servers alike), stored with its health warnings."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import date, timedelta
from functools import partial

from eval_pipeline.grading import ReferenceResult, reference_health, run_references
from eval_pipeline.sandbox import SandboxLimits, ServerSandbox, SqlSandbox, open_sandbox
from eval_pipeline.store import StateFolder, decode_json_rows, read_latest, write_rows
from eval_pipeline.suite import Case, DatabaseConfig, Suite, SuiteConfig

__all__ = [
    "EXPECTED_EMPTY_TAG",
    "REFERENCE_LIMITS",
    "compute_references",
    "load_references",
    "references_by_database",
]

REFERENCE_LIMITS = SandboxLimits(timeout_s=120.0, store_max_rows=100_000, model_max_rows=1)

#: Reference queries of one database run at once, at most (and no more than `test.threads`).
REFERENCE_THREADS = 8

#: A test tagged so says its right answer is no rows: its empty reference is no warning.
EXPECTED_EMPTY_TAG = "empty-answer"


def compute_references(
    suite: Suite, run_date: date, *, layout: StateFolder
) -> list[ReferenceResult]:
    """Run every reference SQL on its test's database and store the results for the day, each
    with its reference-health warnings (drift against the previous day's stored results)."""
    previous = load_references(layout, run_date - timedelta(days=1))
    results = references_by_database(suite.config, suite.cases, REFERENCE_LIMITS, previous=previous)
    rows = [{**r.to_row(), "run_date": run_date} for r in results]
    write_rows(layout, "reference_results", rows, run_date=run_date)
    return results


def load_references(layout: StateFolder, run_date: date) -> dict[str, ReferenceResult]:
    rows = decode_json_rows(
        "reference_results", read_latest(layout, "reference_results", run_date=run_date)
    )
    return {row["name"]: ReferenceResult.from_row(row) for row in rows}


def references_by_database(
    config: SuiteConfig,
    cases: Sequence[Case],
    limits: SandboxLimits,
    *,
    previous: Mapping[str, ReferenceResult] | None = None,
) -> list[ReferenceResult]:
    """The reference result of every case with SQL, each run on its `database:` (default: the
    first configured) and naming it, in the order of `cases`; one sandbox per database.

    With `previous` (the previous day's results by test, possibly none), each result also
    carries its reference-health warnings (`reference_health`), checked on the same sandbox.

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
        database = databases[name]
        with _sandbox(database, limits) as sandbox:
            one = partial(_reference, sandbox=sandbox, database=database, previous=previous)
            # The engine runs the queries outside the interpreter lock: several at once.
            workers = max(1, min(REFERENCE_THREADS, config.test.threads, len(group)))
            with ThreadPoolExecutor(workers, thread_name_prefix="reference") as pool:
                for result in pool.map(one, group):
                    found[result.name] = result
    return [found[case.name] for case in with_sql]


def _reference(
    case: Case,
    *,
    sandbox: SqlSandbox | ServerSandbox,
    database: DatabaseConfig,
    previous: Mapping[str, ReferenceResult] | None,
) -> ReferenceResult:
    [result] = run_references([case], sandbox)
    result = replace(result, database=database.name, database_version=database.fingerprint)
    if previous is None:
        return result
    return _with_health(case, result, sandbox, previous.get(case.name))


def _with_health(
    case: Case,
    result: ReferenceResult,
    sandbox: SqlSandbox | ServerSandbox,
    previous: ReferenceResult | None,
) -> ReferenceResult:
    # The test "did not change" for drift when its reference SQL did not: a new tolerance
    # or prompt does not move the expected answer.
    warnings = reference_health(
        result,
        sandbox.execute,
        previous=previous,
        previous_test_hash=_test_hash(previous, result) if previous is not None else None,
        test_hash=_test_hash(result, result),
        dialect=sandbox.dialect,
    )
    if EXPECTED_EMPTY_TAG in case.tags:
        warnings = [w for w in warnings if w.kind != "no_rows"]
    return replace(result, warnings=[w.to_row() for w in warnings])


def _test_hash(reference: ReferenceResult, today: ReferenceResult) -> str:
    # Moved to another database, the test has a new answer to expect: no drift. A row stored
    # before the database was kept counts as today's database.
    return f"{reference.database or today.database}\n{reference.sql.strip()}"


@contextlib.contextmanager
def _sandbox(
    database: DatabaseConfig, limits: SandboxLimits
) -> Iterator[SqlSandbox | ServerSandbox]:
    if not database.is_server and (database.path is None or not database.path.exists()):
        raise FileNotFoundError(
            f"cannot run reference SQL: the warehouse {database.path} does not exist; build it first"
        )
    with open_sandbox(database, limits) as sandbox:
        yield sandbox

"""Fixtures shared across the test packages: the bundled sample suite's warehouse, built once.

The warehouse is built the way users build it, by materializing the dbt assets through
Dagster, in a copy of the suite in a temporary folder so the repository stays clean. The
build takes ~20-60 s, so every test that needs the real warehouse (reference SQL checks,
the offline demo run) shares one build per test run, across the pytest-xdist workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import pipeline
from eval_pipeline.store import file_lock
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.fast_lane import refuse_dagster_work

# The S3 endpoint (moto_server) and a fresh bucket per test, for the bucket-store tests.
from eval_pipeline_tests.store.buckets import bucket, s3_endpoint  # noqa: F401

# DuckDB clients older than the library (the duckdb-cli wheel, duckdb 1.0), once per session.
from eval_pipeline_tests.store.older_duckdb import (  # noqa: F401
    older_duckdb_cli,
    oldest_duckdb_python,
)

# An empty PostgreSQL per module for a Dagster instance's storage (deploy/dagster.yaml).
from eval_pipeline_tests.warehouses.servers import dagster_postgres  # noqa: F401

# A PostgreSQL 15 holding the small warehouse, once per session.
from eval_pipeline_tests.warehouses.small_warehouse import postgres  # noqa: F401

# Some machines' images set PYTHONDONTWRITEBYTECODE: then every command a test starts would
# compile the package's sources anew. The suite's processes cache their bytecode as usual.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

SAMPLE_SUITE_DIR = Path(__file__).resolve().parents[1] / "tests_suite"
SAMPLE_DBT_DIR = SAMPLE_SUITE_DIR / "dbt"
_NOT_SOURCES = shutil.ignore_patterns(
    ".eval", "target", "logs", "outputs", "*.duckdb", "*.duckdb.wal"
)


@dataclass(frozen=True)
class SampleWarehouse:
    """A built sample warehouse: the DuckDB file, dbt's target folder (with manifest.json),
    and the materialized dbt asset keys as Dagster recorded them."""

    path: Path
    target: Path
    materialized: frozenset[str]


def copy_sample_suite(destination: Path) -> Path:
    """The sample suite's sources (no build output, no results) copied to `destination`."""
    shutil.copytree(SAMPLE_SUITE_DIR, destination, ignore=_NOT_SOURCES)
    return destination


@pytest.fixture(scope="session")
def sample_warehouse(tmp_path_factory: pytest.TempPathFactory) -> SampleWarehouse:
    """Build the sample warehouse through Dagster's `build_warehouse` job (dbt build: models,
    seeds and dbt tests) into a temp copy of the suite, once per test run: the first worker
    that needs it builds it, under a lock, into the folder every worker shares; the others
    open that build. Open the file read-only: it is shared."""
    from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions

    shared = run_wide_folder(tmp_path_factory)
    folder = shared / "sample_warehouse"
    built = folder / "materialized.json"  # written last: the build is complete
    with file_lock(shared / "sample_warehouse.lock"):
        if not built.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half way
            suite = copy_sample_suite(folder / "suite")
            defs = build_definitions(suite)
            with dg.DagsterInstance.ephemeral() as instance:
                result = defs.resolve_job_def(WAREHOUSE_JOB).execute_in_process(
                    instance=instance, raise_on_error=False
                )
                assert result.success, "the warehouse build through Dagster failed"
                materialized = sorted(
                    e.asset_key.to_user_string() for e in result.get_asset_materialization_events()
                )
            built.write_text(json.dumps(materialized))
    suite = folder / "suite"
    from eval_pipeline.defs.dbt_target import parse_target

    return SampleWarehouse(
        path=suite / "warehouse.duckdb",
        target=parse_target(suite / "dbt"),
        materialized=frozenset(json.loads(built.read_text())),
    )


def run_wide_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary folder every pytest-xdist worker of this test run shares (the run's base
    temporary folder, which holds each worker's own), or this process's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def dbt_parse_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test run's dbt parses go to a folder every worker shares, not the user's cache."""
    from eval_pipeline.defs.dbt_target import CACHE_ENV

    folder = run_wide_folder(tmp_path_factory) / "cache"
    os.environ[CACHE_ENV] = str(folder)
    return folder


@pytest.fixture(scope="session")
def history_dbt_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged history project's dbt target folder (manifest.json), parsed once per test
    run (the first worker parses, under a lock): the project is the same for every suite (its
    paths come as --vars when it runs), so a new suite's state folder may start with a copy
    instead of parsing it again. Copy it; never write into it."""
    from eval_pipeline.defs.assets.history import PROJECT_DIR
    from eval_pipeline.defs.assets.warehouse import prepare_dbt_project

    shared = run_wide_folder(tmp_path_factory)
    with file_lock(shared / "history_dbt.lock"):  # no worker copies a manifest half written
        manifest = prepare_dbt_project(PROJECT_DIR).manifest_path
    assert manifest.is_file()
    return manifest.parent


# Fixtures whose cost makes a test slow wherever it is used: the sample warehouse (a dbt build
# through Dagster), the history project's parse (dbt), the PostgreSQL / MariaDB servers of the
# warehouse tests, and the Dagster instance the pipeline tests materialize in.
SLOW_FIXTURES = frozenset(
    {"sample_warehouse", "history_dbt_target", "postgres", "mariadb", "instance"}
)


# The longest test files (a minute or more of a worker's time each), longest first. With
# `--dist loadfile` a file runs whole on one worker, and pytest-xdist hands out files in the
# order of their test counts by default: these few-test files came last, so one worker still
# ran one of them while the other had finished. Handed out first, they run while the many
# short files are still there to even out the end. Only the order changes: a file missing
# here (renamed, new) keeps its place among the rest. One user of the shared sample warehouse
# only (test_semantic_sample.py): two at once would make the second wait for its build.
LONGEST_FILES = (
    "cli/test_cli_unchanged_rerun.py",
    "cli/test_cli_bucket_store.py",
    "pipeline/test_daemon_backfill.py",
    "cli/test_readme_commands.py",
    "grading/test_semantic_sample.py",
    "cli/test_cli_production_instance.py",
    "cli/test_cli_ui.py",
    "pipeline/test_history_marts.py",
    "defs/test_two_suites_dg_dev.py",
    "pipeline/test_lineage_in_the_ui.py",
    "pipeline/test_processes_bucket.py",
    "cli/test_cli_rejudge_samples.py",
    "cli/test_cli_lineage.py",
    "pipeline/test_attempt_budget.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, files are handed out in the order `pytest_collection_modifyitems`
    leaves them (its own reordering by test count is turned off: the hook below keeps it for
    the files not in LONGEST_FILES)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _hand_out_order(items: list[pytest.Item]) -> None:
    """LONGEST_FILES first, in their order; then the other files, most tests first (as
    pytest-xdist orders them by default), each file's tests in their own order."""
    file = lambda item: item.nodeid.split("::", 1)[0]  # noqa: E731
    tests = Counter(file(item) for item in items)
    rank = {f"eval_pipeline_tests/{name}": place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: (rank.get(file(item), len(rank)), -tests[file(item)]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` every test that uses a slow fixture, directly or through another fixture,
    so the fast lane never starts one (a fixture reached by `getfixturevalue` marks its own
    parameters instead, as `small_database` does). Under pytest-xdist, order the files as
    they are to be handed out (`_hand_out_order`)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _hand_out_order(items)


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The fast lane's promise, checked: a test not marked `slow` that starts a subprocess
    fails, saying so, instead of quietly making `-m "not slow"` slow."""
    if request.node.get_closest_marker("slow") is None:

        def refuse(*_args, **_kwargs):
            raise AssertionError(f"{request.node.nodeid} starts a subprocess: mark it slow")

        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    yield


_DAGSTER_WORK_CAUGHT = pytest.StashKey[list[str]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """The fast lane's promise about Dagster, checked from a test's first fixture to its
    teardown (its module's fixtures included): a test not marked `slow` that starts a
    Dagster run or records in an instance fails, saying so (`fast_lane.py`)."""
    if item.get_closest_marker("slow") is not None:
        return (yield)
    caught = item.stash[_DAGSTER_WORK_CAUGHT] = []
    with pytest.MonkeyPatch.context() as patch:
        refuse_dagster_work(patch, item.nodeid, caught)
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A refusal the code under test swallowed (the record keeps a record it could not
    write aside, and goes on) still fails the phase it happened in."""
    report = yield
    caught = item.stash.get(_DAGSTER_WORK_CAUGHT, None)
    if caught:
        if report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(dict.fromkeys(caught))
        caught.clear()
    return report


@pytest.fixture(autouse=True)
def _signals_as_in_a_terminal():
    """Each test starts with SIGINT and SIGTERM as a command started from a terminal has them,
    and every process it starts inherits them so: an ignored signal is inherited across exec.
    pytest-xdist's workers ignore SIGINT (Ctrl-C is for the main process), and Dagster, after
    a run in this process, maps SIGTERM onto SIGINT's disposition: a server or command a test
    started would then ignore the SIGTERM or Ctrl-C the test sends it."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in saved.items():
        if handler is not None:
            signal.signal(signum, handler)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders `load_suite` parsed from here on, as the once-per-process loader
    (`pipeline/_loaded_suite.py`, behind the Dagster layer's suite resource) calls it."""
    parsed: list[Path] = []

    def counting(root):
        parsed.append(root)
        return load_suite(root)

    monkeypatch.setattr(pipeline._loaded_suite, "load_suite", counting)
    return parsed


@pytest.fixture(autouse=True)
def _forget_secrets():
    """Secrets a test's config resolved are redacted process-wide; the next test starts clean."""
    yield
    from eval_pipeline.suite import forget_secrets

    forget_secrets()

"""Fixtures shared across the test packages: the bundled sample suite's warehouse, built once.

The warehouse is built the way users build it, by materializing the dbt assets through
Dagster, in a copy of the suite in a temporary folder so the repository stays clean. The
build takes ~20-60 s, so every test that needs the real warehouse (reference SQL checks,
the offline demo run) shares one build per session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

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
    seeds and dbt tests) into a temp copy of the suite. Open the file read-only: it is shared."""
    from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions

    suite = copy_sample_suite(tmp_path_factory.mktemp("sample_warehouse") / "suite")
    defs = build_definitions(suite)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(WAREHOUSE_JOB).execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert result.success, "the warehouse build through Dagster failed"
        materialized = frozenset(
            e.asset_key.to_user_string() for e in result.get_asset_materialization_events()
        )
    return SampleWarehouse(
        path=suite / "warehouse.duckdb", target=suite / "dbt" / "target", materialized=materialized
    )


# Fixtures whose cost makes a test slow wherever it is used: the sample warehouse (a dbt build
# through Dagster), the PostgreSQL / MariaDB servers of the warehouse tests, the Dagster
# instance the pipeline tests materialize in, and the history project's `dbt parse`.
SLOW_FIXTURES = frozenset(
    {"sample_warehouse", "postgres", "mariadb", "instance", "history_manifest"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` every test that uses a slow fixture, directly or through another fixture,
    so the fast lane never starts one (a fixture reached by `getfixturevalue` marks its own
    parameters instead, as `small_database` does)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The fast lane's promise, checked: a test not marked `slow` that starts a subprocess
    fails, saying so, instead of quietly making `-m "not slow"` slow."""
    if request.node.get_closest_marker("slow") is None:

        def refuse(*_args, **_kwargs):
            raise AssertionError(f"{request.node.nodeid} starts a subprocess: mark it slow")

        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    yield


@pytest.fixture(autouse=True)
def _forget_secrets():
    """Secrets a test's config resolved are redacted process-wide; the next test starts clean."""
    yield
    from eval_pipeline.suite._secrets import forget_secrets

    forget_secrets()

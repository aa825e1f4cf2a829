"""Fixtures shared across the test packages: the bundled sample suite's warehouse, built once.

`dbt build` of `tests_suite/dbt` takes ~15-20 s, so every slow test that needs the real
warehouse (reference SQL checks, the offline demo run) shares one build per session, made in
a temporary folder so the repository stays clean.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SAMPLE_SUITE_DIR = Path(__file__).resolve().parents[1] / "tests_suite"
SAMPLE_DBT_DIR = SAMPLE_SUITE_DIR / "dbt"


@dataclass(frozen=True)
class SampleWarehouse:
    """A built sample warehouse: the DuckDB file, and dbt's target folder (with manifest.json)."""

    path: Path
    target: Path


def _dbt_executable() -> str | None:
    sibling = Path(sys.executable).with_name("dbt")
    return str(sibling) if sibling.exists() else shutil.which("dbt")


@pytest.fixture(scope="session")
def sample_warehouse(tmp_path_factory: pytest.TempPathFactory) -> SampleWarehouse:
    """Build the sample warehouse with `dbt build` (models and dbt tests) into a temp folder.

    Skips when dbt is not installed. Open the file read-only: other tests share it.
    """
    dbt = _dbt_executable()
    if dbt is None:
        pytest.skip("the dbt executable is not installed")
    work = tmp_path_factory.mktemp("sample_warehouse")
    path = work / "warehouse.duckdb"
    env = {
        **os.environ,
        "EVAL_WAREHOUSE_PATH": str(path),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    command = [
        dbt,
        "build",
        "--project-dir",
        str(SAMPLE_DBT_DIR),
        "--profiles-dir",
        str(SAMPLE_DBT_DIR),
        "--target-path",
        str(work / "target"),
        "--log-path",
        str(work / "logs"),
    ]
    done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"dbt build failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    return SampleWarehouse(path=path, target=work / "target")

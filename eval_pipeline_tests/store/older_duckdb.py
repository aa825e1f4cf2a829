"""DuckDB clients older than the library, installed from PyPI for the session (as a user would:
`pip install duckdb-cli`), each into a folder of its own; a test needing one is skipped with the
reason when the package index cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# The last stable line before the library's 2.0 (`pip install duckdb-cli` gives it), and the
# oldest release results.duckdb's storage version promises to be read by.
CLI_REQUIREMENT = "duckdb-cli==1.5.6"
OLDEST_PYTHON_REQUIREMENT = "duckdb==1.0.0"


def _install(requirement: str, target: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), requirement],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot install {requirement} from the package index: {result.stderr[-300:]}")


@dataclass(frozen=True)
class DuckDBCli:
    """The `duckdb` command of the `duckdb-cli` wheel."""

    folder: Path

    @property
    def binary(self) -> Path:
        return self.folder / "duckdb_cli" / "duckdb"

    def env(self) -> dict[str, str]:
        """An environment whose PATH finds this `duckdb` first (the wheel's launcher script)."""
        paths = [str(self.folder / "bin"), os.environ.get("PATH", "")]
        return {**os.environ, "PATH": os.pathsep.join(paths), "PYTHONPATH": str(self.folder)}

    def run(self, database: Path | str, sql: str, *, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.binary), "-readonly", "-csv", "-noheader", str(database), sql],
            capture_output=True, text=True, timeout=120, cwd=cwd,
        )  # fmt: skip


@pytest.fixture(scope="session")
def older_duckdb_cli(tmp_path_factory: pytest.TempPathFactory) -> DuckDBCli:
    folder = tmp_path_factory.mktemp("duckdb-cli")
    _install(CLI_REQUIREMENT, folder)
    cli = DuckDBCli(folder)
    version = subprocess.run([str(cli.binary), "-version"], capture_output=True, text=True)
    assert version.stdout.startswith("v1.5."), version.stdout + version.stderr
    return cli


@pytest.fixture(scope="session")
def oldest_duckdb_python(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment in which `python -c 'import duckdb'` imports duckdb 1.0.0."""
    folder = tmp_path_factory.mktemp("duckdb-1.0")
    _install(OLDEST_PYTHON_REQUIREMENT, folder)
    return {**os.environ, "PYTHONPATH": str(folder)}

"""The real `eval-pipeline` console script, run in a subprocess as a user runs it.

result = run_cli("test", "--date", DAY, cwd=suite)
no_traceback(result)
document = json.loads(written_results(result.stderr).read_text())
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from eval_pipeline_tests.warehouses.servers import Server

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def cli_env() -> dict[str, str]:
    """The caller's environment without what would redirect the instance or force colour."""
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def production_env(home: Path, server: Server) -> dict[str, str]:
    """`cli_env` with DAGSTER_HOME at a copy of deploy/dagster.yaml on `server`'s PostgreSQL."""
    return {
        **cli_env(),
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": server.host,
        "DAGSTER_PG_PORT": str(server.port),
        "DAGSTER_PG_USER": server.user,
        "DAGSTER_PG_PASSWORD": server.password,
        "DAGSTER_PG_DB": server.dbname,
    }


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=180
    )


def written_results(output: str) -> Path:
    """The results file named by the "results written to …" line, whole on one line even
    when the path is longer than the 80 columns a pipe gets (CI logs, copy-paste)."""
    match = re.search(r"^results written to (\S+\.json)$", output, re.MULTILINE)
    assert match, output
    return Path(match.group(1))


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def sql_rows(root: Path, query: str) -> list[list[str]]:
    """`eval-pipeline sql` in the suite `root`: the rows of its CSV, without the header."""
    result = run_cli("sql", query, "--format", "csv", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))[1:]


def runs_of(suite: Path) -> list[dg.RunRecord]:
    """The suite instance's runs, oldest first."""
    with dg.DagsterInstance.from_config(str(suite / ".eval" / "dagster_home")) as instance:
        return list(reversed(instance.get_run_records()))

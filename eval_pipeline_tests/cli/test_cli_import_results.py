"""`eval-pipeline import-results` on a nao project: a team's history in, twice without
duplicates, a broken file named and skipped (exit 2), nothing of it written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.test_cli_test_command import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.suite.nao_project import write_nao_project

pytestmark = pytest.mark.slow  # the real console script, in subprocesses

NAO_FILE = Path(__file__).parents[1] / "pipeline" / "nao_results" / "results_20260105_143022.json"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )


def _count(project: Path) -> str:
    result = run_cli(
        "sql",
        "SELECT count(*) AS n FROM grades WHERE run_date = '2026-01-05'",
        "--format",
        "csv",
        cwd=project,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1]


def test_import_results_brings_a_teams_history_in_once_and_names_a_broken_file(tmp_path):
    project = write_nao_project(tmp_path / "shop")
    outputs = project / "tests" / "outputs"
    shutil.copy(NAO_FILE, outputs / NAO_FILE.name)
    (outputs / "results_20260106_090000.json").write_text(
        '{"timestamp": "2026-01-06T09:00"', "utf-8"
    )
    files = [f"tests/outputs/{p.name}" for p in sorted(outputs.glob("results_*.json"))]

    first = run_cli("import-results", *files, cwd=project)
    no_traceback(first)
    assert first.returncode == 2, first.stdout + first.stderr  # one file was skipped
    assert f"imported tests/outputs/{NAO_FILE.name}" in first.stdout
    assert "4 run(s) from 1 file(s) imported; days: 2026-01-05" in first.stdout
    skipped = first.stderr.strip().splitlines()
    assert len(skipped) == 1, first.stderr
    assert skipped[0].startswith("skipped tests/outputs/results_20260106_090000.json: is not JSON")
    assert _count(project) == "4"

    again = run_cli("import-results", files[0], cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already in the store" in again.stdout and "0 run(s) from 0 file(s)" in again.stdout
    assert _count(project) == "4"  # no duplicate

"""`eval-pipeline import-results` on a nao project: a team's history in, twice without
duplicates, a broken file named and skipped (exit 2), nothing of it written."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pytest

from eval_pipeline.pipeline import today
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.test_cli_nao_project import _by_prompt
from eval_pipeline_tests.cli.test_cli_test_command import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, write_nao_project

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


def _nao_file_of(day: date, into: Path) -> Path:
    """The example nao file, dated `day` (nao dates a file by its `timestamp`)."""
    document = json.loads(NAO_FILE.read_text())
    document["timestamp"] = f"{day.isoformat()}T08:15:00.000000"
    path = into / f"results_{day.strftime('%Y%m%d')}_081500.json"
    path.write_text(json.dumps(document), "utf-8")
    return path


def test_a_native_run_after_importing_todays_nao_file_runs_its_own_tests(tmp_path):
    """Imported runs are history: a native evaluation of the same day never takes them for
    runs of ours (they have no inputs to match), and needs no --no-cache."""
    day = today()
    with ScriptedServer("openai", script=_by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        imported = _nao_file_of(day, project / "tests" / "outputs")
        first = run_cli("import-results", f"tests/outputs/{imported.name}", cwd=project)
        assert first.returncode == 0, first.stdout + first.stderr
        native = subprocess.run(
            [str(SCRIPT), "test", "--format", "json"],
            cwd=project,
            env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    no_traceback(native)
    assert native.returncode == 1, native.stdout + native.stderr  # order_count is wrong
    document = json.loads(native.stdout)
    assert sorted((r["name"], r["attempt"], r["passed"]) for r in document["results"]) == [
        ("order_count", 0, False),
        ("total_revenue", 0, True),
    ]
    assert document["executed_runs"] == 2 and server.requests  # ours ran, none was "reused"

    again = run_cli("import-results", f"tests/outputs/{imported.name}", cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already in the store" in again.stdout  # the day is ours now; the import is history

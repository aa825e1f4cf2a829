"""`dg` accepts the project: `dg check defs` and `dg list defs` load the code location `dg dev` serves."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # dg loads the definitions in a subprocess

REPO = Path(__file__).resolve().parents[2]


def dg(*args: str) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("dg")
    assert executable, "dg (dagster-dg-cli) is a dependency of the package"
    return subprocess.run(
        [executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_dg_checks_and_lists_the_definitions():
    checked = dg("check", "defs")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr

    listed = dg("list", "defs", "--json")
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    keys = {asset["asset_key"] for asset in defs["assets"]}
    assert {"test_cases", "agent_context", "grading_rules", "agent_runs", "grades"} <= keys
    assert {"daily_evaluation"} <= {schedule["name"] for schedule in defs["schedules"]}
    assert {"evaluate_model_day", "day_report"} <= {job["name"] for job in defs["jobs"]}

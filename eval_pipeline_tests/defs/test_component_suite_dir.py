"""`EvalSuiteComponent`'s `suite_dir` through `dg`, as a team adds a suite to its project: the
scaffold points at a suite that exists (or says what to set), and `dg check defs` refuses a
`suite_dir` that is no suite, naming the component's file and the field."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from eval_pipeline.defs.component import UNSET_SUITE_DIR
from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline_tests.pipeline.services import BIN

pytestmark = pytest.mark.slow  # `dg check defs` loads the project's code location

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_suites"
COMPONENT = "eval_pipeline.defs.component.EvalSuiteComponent"


def _dg(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    env.pop("EVAL_SUITE_DIR", None)
    return subprocess.run(
        [str(BIN / "dg"), *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_scaffold_points_at_a_suite_and_dg_check_refuses_one_that_is_not(
    tmp_path: Path, history_dbt_target: Path
):
    project = Path(shutil.copytree(EXAMPLE, tmp_path / "two_suites"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    defs = project / "src" / "two_suites" / "defs"

    # From the project's folder, which is no suite: the file says what to set, and so does dg.
    unset = _dg(project, home, "scaffold", "defs", COMPONENT, "unset")
    assert unset.returncode == 0, unset.stdout + unset.stderr
    written = (defs / "unset" / "defs.yaml").read_text()
    assert f"suite_dir: {UNSET_SUITE_DIR}" in written, written
    assert "set attributes.suite_dir in " in unset.stderr and "--suite-dir DIR" in unset.stderr

    # Given the suite: the path from the defs.yaml's folder to it, which loads.
    given = _dg(
        project, home, "scaffold", "defs", COMPONENT, "third", "--suite-dir", "suites/support"
    )
    assert given.returncode == 0, given.stdout + given.stderr
    assert "suite_dir: ../../../../suites/support" in (defs / "third" / "defs.yaml").read_text()

    refused = _dg(project, home, "check", "defs", "--use-active-venv")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    said = f"{defs / 'unset' / 'defs.yaml'}: attributes.suite_dir: "
    assert said in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert "is no eval_pipeline suite" in refused.stdout + refused.stderr

    shutil.rmtree(defs / "unset")
    checked = _dg(project, home, "check", "defs", "--use-active-venv")
    assert checked.returncode == 0, checked.stdout + checked.stderr

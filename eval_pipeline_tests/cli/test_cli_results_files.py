"""The results file of `eval-pipeline test`: one per command, even when two commands finish in
the same second, and its verdict is the one the command printed and exited with."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.cli.replay_suite import DAY, write_suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("results_files") / "suite")


def test_a_failing_command_without_a_minimum_never_writes_a_passed_gate(suite):
    """No minimum: every run must pass. The file, the summary and the exit code agree."""
    result = run_cli("test", "--date", DAY, "-m", "replay:mixed", cwd=suite)
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr  # top_customer is wrong
    assert "3/4 passed" in result.stdout
    threshold = json.loads(written_results(result.stdout).read_text())["threshold"]
    assert threshold["min_accuracy"] is None and threshold["passed"] is False

    met = run_cli("test", "--date", DAY, "-m", "replay:mixed", "--min-accuracy", "0.7", cwd=suite)
    assert met.returncode == 0, met.stdout + met.stderr
    threshold = json.loads(written_results(met.stdout).read_text())["threshold"]
    assert (threshold["min_accuracy"], threshold["passed"]) == (0.7, True)


def test_each_command_writes_its_own_results_file_when_the_name_is_taken(suite):
    """Another command of the same second has the name (here: every name of the next three
    minutes is taken): this one writes beside it, and the other file is untouched."""
    outputs = suite / "outputs"
    outputs.mkdir(exist_ok=True)
    start = datetime.now()
    taken = {}
    for second in range(180):
        moment = start + timedelta(seconds=second)
        path = outputs / f"results_{DAY.replace('-', '')}_{moment:%H%M%S}.json"
        path.write_text('{"another": "command"}', "utf-8")
        taken[path] = path.read_bytes()

    result = run_cli("test", "--date", DAY, "-m", "replay:good", cwd=suite)
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    written = written_results(result.stdout)
    assert written not in taken and written.parent == outputs
    assert written.name.startswith(f"results_{DAY.replace('-', '')}_")
    assert json.loads(written.read_text())["results"]  # the whole document, in its own file
    assert {path: path.read_bytes() for path in taken} == taken  # nothing overwritten

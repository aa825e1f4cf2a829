"""Error runs through `eval-pipeline test`: a broken evaluation is exit 3, never a wrong answer.

A run that ended as `error` (a provider that cannot be reached, a recording with no answer)
says nothing of the agent. Unless errors are allowed (`--allow-errors`, `test.allow_errors`),
any such run exits 3, whatever the accuracy gate says; allowed, they count as not passed and
the gate decides 0 or 1. The summary line, the stderr verdict, the results file's `threshold`
and JUnit's totals say the same.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.cli.replay_suite import (
    CASES,
    DAY,
    NEXT_DAY,
    REPLIES,
    recording,
    rekey,
    write_suite,
)

pytestmark = pytest.mark.slow

NOTHING_RECORDED = '{"_comment": "a recording with no answer: every run is an error"}\n'


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_suite(tmp_path_factory.mktemp("error_runs") / "suite")
    (root / "recordings" / "empty.jsonl").write_text(NOTHING_RECORDED)
    return root


@pytest.fixture
def suite(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "suite"))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once it is closed


def _configure(suite: Path, **test_options: object) -> None:
    path = suite / "eval_config.yaml"
    config = yaml.safe_load(path.read_text())
    config["test"].update(test_options)
    config["llm"]["providers"].append(
        {
            "provider": "down",
            "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
            "timeout_s": 5,
            "models": [{"id": "m"}],
        }
    )
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _threshold(result) -> dict:
    return json.loads(written_results(result.stderr).read_text())["threshold"]


def test_an_unreachable_provider_exits_3_with_one_line_and_allowed_errors_fail_the_tests(suite):
    _configure(suite)
    args = ("test", "--date", DAY, "-m", "down:m", "-s", "total_revenue", "-o", "report.txt")

    broken = run_cli(*args, cwd=suite)

    no_traceback(broken)
    assert broken.returncode == 3, broken.stderr  # a broken run, not a failed test (1)
    verdict = [line for line in broken.stderr.splitlines() if line.startswith("error: ")]
    assert verdict == [
        "error: 1 run(s) ended in an error: total_revenue [down:m]; the evaluation is "
        "incomplete whatever its accuracy (0.0%), since errors are not allowed "
        "(test.allow_errors); exit 3. Fix what the errors say and run again (unchanged runs "
        "are reused), or count them as not passed with --allow-errors"
    ]
    report = (suite / "report.txt").read_text()
    assert "could not connect" in report
    assert "0 failed, 1 error(s), so the evaluation is incomplete (exit 3)" in report
    assert _threshold(broken) == {
        "min_accuracy": None,
        "mode": "average",
        "accuracy": 0.0,
        "passed": False,
        "errors": 1,
        "allow_errors": False,
    }

    # Allowed, the error is a run that did not pass: without a minimum, every run must.
    allowed = run_cli(*args, "--allow-errors", cwd=suite)

    no_traceback(allowed)
    assert allowed.returncode == 1, allowed.stderr
    assert not [line for line in allowed.stderr.splitlines() if line.startswith("error: ")]
    assert (
        "accuracy 0.0%; no minimum configured, so every run must pass: 1 test(s) did not; "
        "1 run(s) ended in an error: total_revenue [down:m], counted as not passed"
    ) in allowed.stderr
    assert "1 error(s) counted as not passed (errors allowed)" in (suite / "report.txt").read_text()
    threshold = _threshold(allowed)
    assert (threshold["passed"], threshold["errors"], threshold["allow_errors"]) == (False, 1, True)


def _junit_totals(result) -> dict[str, str]:
    root = ET.fromstring(result.stdout)
    return {key: root.get(key) for key in ("tests", "failures", "errors")}


def test_runs_that_all_errored_exit_3_under_a_minimum_of_0_and_the_outputs_agree(suite):
    # replay:mixed fails top_customer; every run of replay:empty is an error.
    args = ("test", "--date", DAY, "-m", "replay:mixed", "-m", "replay:empty")
    args += ("--min-accuracy", "0", "--format", "junit")

    broken = run_cli(*args, cwd=suite)

    no_traceback(broken)
    assert broken.returncode == 3, broken.stderr
    assert "meets the minimum" not in broken.stderr
    assert "error: 4 run(s) ended in an error: customer_count [replay:empty]" in broken.stderr
    assert _junit_totals(broken) == {"tests": "8", "failures": "1", "errors": "4"}
    threshold = _threshold(broken)
    assert (threshold["passed"], threshold["errors"], threshold["allow_errors"]) == (
        False,
        4,
        False,
    )

    # Allowed, the gate decides as it would on failed runs: 0% meets a minimum of 0.
    allowed = run_cli(*args, "--allow-errors", cwd=suite)

    no_traceback(allowed)
    assert allowed.returncode == 0, allowed.stderr
    assert (
        "average accuracy 37.5% meets the minimum 0.0%; 4 run(s) ended in an error: "
        "customer_count [replay:empty], order_count [replay:empty], top_customer "
        "[replay:empty], total_revenue [replay:empty], counted as not passed"
    ) in allowed.stderr
    assert _junit_totals(allowed) == {"tests": "8", "failures": "1", "errors": "4"}
    threshold = _threshold(allowed)
    assert (threshold["passed"], threshold["errors"], threshold["allow_errors"]) == (True, 4, True)


def test_test_allow_errors_in_the_config_is_the_option(suite):
    _configure(suite, allow_errors=True)
    args = ("test", "--date", DAY, "-m", "replay:empty", "-s", "total_revenue")

    allowed = run_cli(*args, "--min-accuracy", "0", cwd=suite)

    no_traceback(allowed)
    assert allowed.returncode == 0, allowed.stderr
    assert "1 error(s) counted as not passed (errors allowed)" in allowed.stdout
    threshold = json.loads(written_results(allowed.stdout).read_text())["threshold"]
    assert (threshold["passed"], threshold["errors"], threshold["allow_errors"]) == (True, 1, True)


def test_diff_of_stored_days_counts_a_test_now_in_error_apart_from_a_regression(suite):
    """`eval-pipeline diff` (stored days) says a test whose run is now an error is an error,
    not a regression, and exits 0 on it, as the diff of results files does."""
    assert run_cli("test", "--date", DAY, "-m", "replay:drift", cwd=suite).returncode == 0
    # The next day the recording has no answer for total_revenue: its run is an error.
    answered = {name: sql for name, (_, sql) in CASES.items() if name != "total_revenue"}
    (suite / "recordings" / "drift.jsonl").write_text(recording(answered, REPLIES))
    rekey(suite, "drift")
    next_day = run_cli("test", "--date", NEXT_DAY, "-m", "replay:drift", cwd=suite)
    assert next_day.returncode == 3, next_day.stderr

    compared = run_cli("diff", "--model", "replay:drift", cwd=suite)

    no_traceback(compared)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    lines = compared.stdout.splitlines()
    assert "  regressed (0): —" in lines, compared.stdout
    assert "  error (1): total_revenue" in lines, compared.stdout

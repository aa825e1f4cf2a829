"""`eval-pipeline test --budget` through the real script: the options a budget takes, refused
with one line naming the option when they do not fit, before any agent is asked (scripted
agents, `pipeline/coin_agents.py`). The report of a budget that ran is
`pipeline/test_attempt_budget.py`'s."""

from __future__ import annotations

import shutil

import pytest
import yaml

from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.pipeline.coin_agents import CoinAgents

TESTS = [f"t{i:02d}" for i in range(6)]
STRONG = {test: 1.0 for test in TESTS}
WEAK = {test: (0.0 if test in TESTS[:3] else 1.0) for test in TESTS}
MODELS = ("-m", "http:strong", "-m", "http:weak")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agents():
    with CoinAgents({"strong": STRONG, "weak": WEAK}) as server:
        yield server


@pytest.fixture(scope="module")
def suite(agents, tmp_path_factory):
    return agents.write_suite(tmp_path_factory.mktemp("budget") / "suite")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--budget", "40", "-k", "3"), "-k: an attempt budget decides the attempts"),
        (("--decide", "compare"), "--decide: applies to an attempt budget: add --budget RUNS"),
        (("--budget", "40", "--alpha", "1.5"), "--alpha: expected a fraction between 0 and 1"),
        (("--budget", "0"), "--budget: expected a number of runs from 1 to 1,000,000,000"),
        (("--budget", "5"), "5 runs cannot run each selected test once per model (12 runs)"),
    ],
)
def test_a_budget_that_does_not_fit_is_refused_before_anything_runs(suite, agents, options, said):
    asked = len(agents.requests)
    result = run_cli("test", *MODELS, *options, cwd=suite)
    assert result.returncode == 2, result.stdout + result.stderr
    assert said in result.stderr, result.stderr
    no_traceback(result)
    assert len(agents.requests) == asked


def test_a_budget_beyond_any_count_is_refused_naming_the_option(suite, agents):
    asked = len(agents.requests)
    result = run_cli("test", *MODELS, "--budget", "99999999999999999999999", cwd=suite)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--budget: expected a number of runs from 1 to 1,000,000,000" in result.stderr, (
        result.stderr
    )
    no_traceback(result)
    assert len(agents.requests) == asked


@pytest.mark.parametrize(
    ("budget", "said"),
    [
        ({"runs": 10**23}, "test.budget.runs: expected an integer from 1 to 1000000000"),
        (10**23, "test.budget: expected an integer from 1 to 1000000000, got 1000"),
        ({"runs": 5, "usd": 1}, "eval_config.yaml: test.budget.runs: 5 runs cannot run"),
    ],
)
def test_a_configured_budget_that_does_not_fit_names_the_file_and_field(
    suite, agents, tmp_path, budget, said
):
    copy = tmp_path / "suite"
    shutil.copytree(suite, copy, ignore=shutil.ignore_patterns(".eval"))
    config = yaml.safe_load((copy / "eval_config.yaml").read_text())
    config["test"]["budget"] = budget
    (copy / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    asked = len(agents.requests)
    result = run_cli("test", *MODELS, cwd=copy)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "eval_config.yaml" in result.stderr and said in result.stderr, result.stderr
    assert "--budget" not in result.stderr, result.stderr
    no_traceback(result)
    assert len(agents.requests) == asked


def test_dollars_configured_for_unpriced_agents_name_the_file_and_field(tmp_path):
    with CoinAgents({"strong": STRONG}, unpriced=frozenset({"strong"})) as agents:
        root = agents.write_suite(tmp_path / "suite")
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        config["test"]["budget"] = {"usd": 1}
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        result = run_cli("test", "-m", "http:strong", cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    said = "eval_config.yaml: test.budget.usd: a run has no cost"
    assert said in result.stderr and "use test.budget.runs" in result.stderr, result.stderr
    assert "--budget" not in result.stderr, result.stderr
    no_traceback(result)

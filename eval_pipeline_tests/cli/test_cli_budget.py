"""`eval-pipeline test --budget` through the real script: the options a budget takes, refused
with one line naming the option when they do not fit, before any agent is asked (scripted
agents, `pipeline/coin_agents.py`). The report of a budget that ran is
`pipeline/test_attempt_budget.py`'s."""

from __future__ import annotations

import pytest

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
        (("--budget", "0"), "--budget: expected a number of runs ≥ 1"),
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

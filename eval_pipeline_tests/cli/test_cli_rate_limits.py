"""`eval-pipeline test` against a provider that enforces a requests-per-minute limit, as real
accounts have: every run completes instead of ending in error, and the command says that the
limit, not the model, set the pace."""

from __future__ import annotations

import json

import pytest

from eval_pipeline_tests.agents.rate_limits import RateLimit
from eval_pipeline_tests.agents.servers import ScriptedServer, answer
from eval_pipeline_tests.agents.steps import repeat
from eval_pipeline_tests.agents.tiny_suite import ROUTINE, write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY

pytestmark = pytest.mark.slow

TESTS = 6  # two requests each: a query, then the answer


def test_every_run_completes_at_the_providers_pace_and_the_command_says_so(tmp_path):
    # 120 requests a minute and 1 left at first: 12 requests at 6 runs in flight take ~6 s,
    # far longer than the runs themselves however busy the machine.
    limit = RateLimit(ROUTINE, per_minute=120, start=1)
    with ScriptedServer("openai", script=limit) as server:
        root = write_suite(
            tmp_path / "suite",
            cases={f"q{i:02d}": f"How many orders, question {i}?" for i in range(TESTS)},
            providers=[{"provider": "openai", "base_url": server.base_url, "api_key": "sk-x"}],
            threads=6,
        )
        result = run_cli("test", "--date", DAY, "--format", "json", cwd=root, env=cli_env())
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert [r["status"] for r in document["results"]].count("passed") == TESTS
    # The first requests (6 at once, 1 in the bucket) go before an answer tells the limit;
    # after them hardly any is refused (a few may race a refill on a busy machine).
    assert limit.answered == 2 * TESTS and limit.refused <= 5 + 3
    assert (
        "note: openai's rate limit (120 requests/min) set the pace, not the model" in result.stderr
    )


def test_a_judge_behind_a_rate_limit_judges_every_run_at_its_pace(tmp_path):
    verdict = answer(json.dumps({"passed": True, "reasoning": "States the count."}))
    judge_limit = RateLimit(repeat(verdict), per_minute=120, start=1)  # 2 a second
    evaluators = [{"name": "states_a_count", "criteria": "States a number of orders"}]
    with (
        ScriptedServer("openai", script=ROUTINE) as model,
        ScriptedServer("openai", script=judge_limit) as judge,
    ):
        root = write_suite(
            tmp_path / "suite",
            cases={
                f"q{i:02d}": {"prompt": f"How many orders, question {i}?", "evaluators": evaluators}
                for i in range(8)
            },
            providers=[
                {"provider": "openai", "base_url": model.base_url, "api_key": "sk-x"},
                {"provider": "judgeco", "base_url": judge.base_url, "api_key": "sk-y"},
            ],
            judge_model="judgeco:gpt-judge",
            threads=8,
        )
        result = run_cli("test", "--date", DAY, "--format", "json", cwd=root, env=cli_env())
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["status"] for r in json.loads(result.stdout)["results"]] == ["passed"] * 8
    assert judge_limit.answered == 8 and judge_limit.refused <= 7 + 3
    assert "note: judgeco's rate limit (120 requests/min) set the pace" in result.stderr

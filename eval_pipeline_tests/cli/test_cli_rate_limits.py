"""`eval-pipeline test` against a provider that enforces a requests-per-minute limit, as real
accounts have: every run completes instead of ending in error, and the command says that the
limit, not the model, set the pace."""

from __future__ import annotations

import json

import pytest

from eval_pipeline_tests.agents.rate_limits import RateLimit
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.agents.tiny_suite import ROUTINE, write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY

pytestmark = pytest.mark.slow

TESTS = 12  # two requests each: a query, then the answer


def test_every_run_completes_at_the_providers_pace_and_the_command_says_so(tmp_path):
    # 300 requests a minute and 1 left at first: 24 requests at 8 runs in flight, ~5 s.
    limit = RateLimit(ROUTINE, per_minute=300, start=1)
    with ScriptedServer("openai", script=limit) as server:
        root = write_suite(
            tmp_path / "suite",
            cases={f"q{i:02d}": f"How many orders, question {i}?" for i in range(TESTS)},
            providers=[{"provider": "openai", "base_url": server.base_url, "api_key": "sk-x"}],
            threads=8,
        )
        result = run_cli("test", "--date", DAY, "--format", "json", cwd=root, env=cli_env())
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert [r["status"] for r in document["results"]].count("passed") == TESTS
    # Only the first requests, sent before an answer told the limit, may be refused, once.
    assert limit.answered == 2 * TESTS and max(limit.refusals.values(), default=0) <= 1
    assert (
        "note: openai's rate limit (300 requests/min) set the pace, not the model" in result.stderr
    )

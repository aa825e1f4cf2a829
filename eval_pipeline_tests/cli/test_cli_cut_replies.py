"""A reply cut by `max_tokens`, seen through the real `eval-pipeline test` against a live
OpenAI-compatible server: the configured limit is sent, and the cut run is an error that says
how to raise it, not a graded answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer, answer, by_turn, tool_calls
from eval_pipeline_tests.agents.steps import execute_sql
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-01-01"
SQL = "SELECT sum(amount_usd) AS revenue FROM orders WHERE status = 'shipped'"


def test_a_cut_final_reply_is_an_error_run_and_the_configured_max_tokens_is_sent(tmp_path: Path):
    with ScriptedServer("openai") as server:
        server.set_script(
            by_turn(tool_calls(execute_sql(SQL)), answer("Shipped revenue is 5", cut=True))
        )
        root = write_suite(
            tmp_path / "suite",
            cases={"revenue": {"prompt": "What is our revenue?", "sql": SQL}},
            dbt=False,
            providers=[
                {
                    "provider": "local",
                    "base_url": server.base_url,
                    "timeout_s": 5,
                    "max_tokens": 2000,
                    "models": [{"id": "small", "max_tokens": 256}],
                }
            ],
        )
        result = run_cli("test", "--date", DAY, "-m", "local:small", "--format", "json", cwd=root)

    no_traceback(result)
    assert result.returncode == 3, result.stderr  # an error run: the evaluation is incomplete
    assert [r.json["max_tokens"] for r in server.requests] == [256, 256]
    (row,) = json.loads(result.stdout)["results"]
    assert row["status"] == "error"
    assert "local:small: the model reached max_tokens (256) and its reply was cut" in row["message"]
    assert "Raise max_tokens for this model" in row["message"]

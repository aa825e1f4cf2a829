"""The loop closed: a production question no test asked, promoted into a suite with a warehouse, is evaluated by the next `eval-pipeline test` against its promoted reference, and is covered from then on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    by_turn,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli

pytestmark = pytest.mark.slow  # an evaluation, recorded in Dagster by its recorder

DAY = "2026-03-02"
SHIPPED = "SELECT count(*) AS shipped_orders FROM orders WHERE status = 'shipped'"


def conversation() -> dict:
    """A production conversation about shipped orders: the agent's query, voted up."""
    return {
        "conversation_id": "prod-77",
        "user": "dana",
        "started_at": "2026-02-27T10:00:00Z",
        "messages": [
            {"role": "user", "content": "How many orders have shipped so far in total?"},
            {
                "role": "assistant",
                "content": "9 orders have shipped.",
                "tool_calls": [{"name": "execute_sql", "arguments": {"sql_query": SHIPPED}}],
                "feedback": "up",
            },
        ],
    }


def test_a_promoted_question_is_evaluated_against_its_accepted_query(tmp_path: Path):
    script = by_turn(tool_calls(execute_sql(SHIPPED)), answer("9 orders have shipped."))
    with ScriptedServer("openai", script=script) as server:
        root = write_suite(
            tmp_path / "suite",
            cases={"revenue": {"prompt": "What is the revenue of shipped orders?"}},
            providers=[{"provider": "openai", "base_url": server.base_url, "api_key": "sk-x"}],
            dbt=False,
        )
        traces = root / "chats.jsonl"
        traces.write_text(json.dumps(conversation()) + "\n", encoding="utf-8")
        assert run_cli("usage", "import", str(traces), cwd=root).returncode == 0
        before = json.loads(run_cli("recommend", "--format", "json", cwd=root).stdout)
        [uncovered] = [r for r in before if r["kind"] == "uncovered"]
        assert uncovered["conversations"] == ["prod-77"]

        promoted = run_cli("promote", "prod-77", "--name", "shipped_orders", cwd=root)
        assert promoted.returncode == 0, promoted.stderr
        test = yaml.safe_load((root / "cases" / "shipped_orders.yml").read_text())
        assert test["sql"].strip() == SHIPPED

        result = run_cli(
            "test",
            "-s",
            "shipped_orders",
            "--date",
            DAY,
            "--format",
            "json",
            cwd=root,
            env=cli_env(),
        )
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = json.loads(result.stdout)["results"]
    assert run["name"] == "shipped_orders" and run["passed"], run
    after = json.loads(run_cli("recommend", "--format", "json", cwd=root).stdout)
    assert uncovered["id"] not in {r["id"] for r in after}

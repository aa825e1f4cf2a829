"""`eval-pipeline test` run in a nao project's folder, against the OpenAI-compatible server
its `nao_config.yaml` declares the nao way (`openaiCompatible/vllm`), with the key read from
the environment as nao does."""

from __future__ import annotations

import json
import subprocess

import pytest

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    exhausted,
    tool_calls,
)
from eval_pipeline_tests.cli.test_cli_test_command import DAY, SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, TESTS, snapshot, write_nao_project

pytestmark = pytest.mark.slow

# The agent answers total_revenue right and order_count wrong.
AGENT_SQL = {"total_revenue": TESTS["total_revenue"][1], "order_count": "SELECT 2 AS orders"}


def _by_prompt(request: RecordedRequest, _index: int) -> Step:
    """Turn 0: run the test's query; turn 1: answer. Tests are told apart by their prompt."""
    text = " ".join(str(m.get("content")) for m in request.messages if m.get("role") == "user")
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    for name, (prompt, _sql) in TESTS.items():
        if prompt in text:
            return tool_calls(execute_sql(AGENT_SQL[name])) if turn == 0 else answer("Done.")
    return exhausted(f"unknown prompt in {text[:80]!r}")


def test_eval_pipeline_test_runs_a_nao_project_as_it_is(tmp_path):
    with ScriptedServer("openai", script=_by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        # Our extras may sit beside nao's file: grade from the last query, no extraction model.
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        before = snapshot(project)
        result = subprocess.run(
            [str(SCRIPT), "test", "--date", DAY, "--format", "json"],
            cwd=project,
            env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr  # one test failed
    assert "no cases/ folder" not in result.stdout + result.stderr
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer sk-vllm-test"}
    assert {r.json["model"] for r in server.requests} == {"qwen3"}
    assert (project / ".eval" / "results.duckdb").exists()  # state in <project>/.eval/
    after = snapshot(project)
    assert {k: v for k, v in after.items() if k in before} == before  # user files untouched
    document = json.loads(result.stdout)
    verdicts = {r["name"]: r["passed"] for r in document["results"]}
    assert verdicts == {"total_revenue": True, "order_count": False}

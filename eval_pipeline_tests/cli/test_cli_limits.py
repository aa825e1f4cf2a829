"""Hostile endpoints through the real CLI: a huge reply, a gzip bomb, a dripping agent, a huge query result.

Each evaluation must end as `error` runs that name the limit hit (and its config key), within
the configured deadlines, whatever the endpoint does.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    by_turn,
    drip,
    execute_sql,
    large_body,
    repeat,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import by_prompt, write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-01-01"


@pytest.fixture
def agent_server() -> Iterator[ScriptedServer]:
    with ScriptedServer("agent") as server:
        yield server


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    with ScriptedServer("openai") as server:
        yield server


def suite_with(root: Path, cases: dict[str, str], limits: dict[str, Any], **entries: Any) -> Path:
    write_suite(root, cases=cases, threads=2, dbt=False, **entries)
    config = yaml.safe_load((root / "eval_config.yaml").read_text())
    config["limits"] = limits
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def evaluate(suite: Path, model: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = run_cli("test", "-m", model, "--date", DAY, "--format", "json", cwd=suite)
    no_traceback(result)
    document = json.loads(result.stdout)
    return result, {r["name"]: r for r in document["results"]}


def test_a_huge_reply_and_a_gzip_bomb_are_error_runs_naming_the_cap(tmp_path, agent_server):
    agent_server.set_script(
        by_prompt(
            {
                "Answer hugely.": [large_body(3_000_000)],
                # ~50 KB on the wire, 200 MB once inflated
                "Answer with a bomb.": [large_body(200_000_000, gzip=True)],
            }
        )
    )
    suite = suite_with(
        tmp_path / "suite",
        {"huge": "Answer hugely.", "bomb": "Answer with a bomb."},
        {"response_max_bytes": 100_000},
        agents=[{"name": "my-agent", "url": agent_server.base_url, "timeout_s": 30}],
    )

    result, runs = evaluate(suite, "http:my-agent")

    assert result.returncode == 3, result.stderr  # error runs: the evaluation is incomplete
    for name in ("huge", "bomb"):
        assert runs[name]["status"] == "error", runs[name]
        assert "passed 100,000 bytes (limits.response_max_bytes)" in runs[name]["message"]
    assert len(agent_server.requests) == 2  # an over-cap reply is not retried


def test_a_dripping_agent_is_cut_at_the_request_deadline_and_the_run_deadline(
    tmp_path, agent_server
):
    agent_server.set_script(repeat(drip(every_s=0.2)))
    suite = suite_with(
        tmp_path / "suite",
        {"slow": "Answer slowly."},
        {"run_timeout_s": 4},
        agents=[{"name": "my-agent", "url": agent_server.base_url, "timeout_s": 1.5}],
    )

    result, runs = evaluate(suite, "http:my-agent")

    assert result.returncode == 3, result.stderr
    assert runs["slow"]["status"] == "error"
    assert "limits.run_timeout_s" in runs["slow"]["message"]
    # By the server's clock: every reply was cut at the request deadline (1.5 s), though a
    # byte came every 0.2 s, and retries stopped at the run deadline (4 s).
    durations = agent_server.drip_durations
    assert durations and max(durations) < 1.5 + 1.0, durations
    assert 2 <= len(agent_server.requests) <= 3, durations


HUGE_QUERY = "SELECT range AS i, repeat('x', 96000) AS s FROM range(10000)"


def test_a_huge_query_result_is_cut_in_the_store_and_the_model_is_told(tmp_path, openai_server):
    openai_server.set_script(
        by_turn(tool_calls(execute_sql(HUGE_QUERY)), answer("Ten thousand wide rows."))
    )
    suite = suite_with(
        tmp_path / "suite",
        {"wide": "Show me everything."},
        {"query_max_bytes": 500_000, "query_cell_max_bytes": 10_000},
        providers=[{"provider": "openai", "base_url": openai_server.base_url, "api_key": "k"}],
    )

    result, runs = evaluate(suite, "openai:gpt-4.1")

    assert runs["wide"]["status"] != "error", runs["wide"]["message"]
    told = openai_server.requests[1].messages[-1]["content"]  # what the model read back
    assert "limits.query_max_bytes" in told and len(told) < 25_000
    with duckdb.connect(
        str(suite / ".eval" / "results.duckdb"),
        read_only=True,
    ) as db:
        (queries,) = db.execute("SELECT queries FROM agent_runs WHERE name = 'wide'").fetchone()
    (query,) = json.loads(queries)
    assert query["truncated"] and 40 <= len(query["rows"]) <= 50  # ~10 KB a row, 500 KB in all
    assert "limits.query_cell_max_bytes" in query["note"]
    cell = query["rows"][0][1]
    assert len(cell.encode()) <= 10_000 and cell.endswith("limits.query_cell_max_bytes of 10,000]")
    assert len(result.stdout) < 2_000_000  # the results document stays small too

"""Replies no file can hold, from a real agent server, through the real `eval-pipeline` script:
each becomes one run's problem (replaced text, or an `error` run naming the number), never
a crash of the model's evaluation, and a journal line that cannot be read back is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder, fetch_read_only
from eval_pipeline.suite import load_config
from eval_pipeline_tests.agents.servers import RecordedRequest, ScriptedServer, Step, agent_reply
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
MODEL = "http:bad"
REPLIES = {
    "surrogate": agent_reply("bad \ud800 reply"),
    "huge_usage": agent_reply("ok", usage={"input_tokens": 10**30}),
    "nan_cost": agent_reply("ok", cost_usd=float("nan")),
    "fine": agent_reply("fine"),
}


def by_test(request: RecordedRequest, _index: int) -> Step:
    return REPLIES[request.json["test"]]


def read_results(root: Path, sql: str) -> list[dict]:
    """Rows of the results, read by the query function `eval-pipeline sql` prints from."""
    columns, rows = fetch_read_only(StateFolder.of(load_config(root)), sql)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def runs(root: Path) -> dict[str, dict]:
    sql = "SELECT name, status, final_text, error, input_tokens, cost_usd FROM agent_runs"
    return {row["name"]: row for row in read_results(root, sql)}


@pytest.fixture(scope="module")
def agent_suite(tmp_path_factory: pytest.TempPathFactory):
    """The suite and its agent server, evaluated once for the module (`evaluation`)."""
    with ScriptedServer("agent") as server:
        server.set_script(by_test)
        root = write_suite(
            tmp_path_factory.mktemp("bad_replies") / "suite",
            cases={name: f"question {name}?" for name in REPLIES},
            agents=[{"name": "bad", "url": server.base_url}],
            dbt=False,
        )
        yield root, server


@pytest.fixture(scope="module")
def evaluation(agent_suite):
    """`eval-pipeline test` of every test against the bad agent: the module's one evaluation."""
    root, _server = agent_suite
    return run_cli("test", "-m", MODEL, "--date", DAY, cwd=root)


def test_a_reply_the_store_cannot_hold_is_one_runs_problem(agent_suite, evaluation):
    root, _server = agent_suite
    done = evaluation
    assert "Traceback" not in done.stderr, done.stderr
    assert "results written to" in done.stdout, done.stdout + done.stderr
    stored = runs(root)
    assert stored["fine"]["status"] == "completed"
    surrogate = stored["surrogate"]
    assert surrogate["status"] == "completed"
    assert surrogate["final_text"] == "bad \ufffd reply"
    assert "lone UTF-16 surrogates" in surrogate["error"]
    assert stored["huge_usage"]["status"] == "error"
    assert "usage.input_tokens" in stored["huge_usage"]["error"]
    assert stored["nan_cost"]["status"] == "error"
    assert "`cost_usd` must be a finite number" in stored["nan_cost"]["error"]


def test_a_journal_line_that_cannot_be_stored_or_read_never_blocks_the_model(
    agent_suite, evaluation
):
    """A journal left by a crash holds a completed run with 1e30 tokens (as an older version
    journaled them) and a damaged line: the next run skips both and keeps the stored run."""
    root, _server = agent_suite
    (row,) = read_results(root, "SELECT * FROM agent_runs WHERE name = 'fine'")
    assert row["status"] == "completed", row
    journal = root / ".eval" / "journal" / "agent_runs" / f"date={DAY}" / "model=http%3Abad"
    journal.mkdir(parents=True, exist_ok=True)
    record = {
        "case_name": "fine",
        "model": MODEL,
        "attempt": 0,
        "run_date": DAY,
        "input_hash": row["input_hash"],
        "context_hash": row["context_hash"],
        "status": "completed",
        "final_text": "fine",
        "usage": {"input_tokens": 10**30, "cached_input_tokens": 0, "output_tokens": 1},
    }
    (journal / "crashed.jsonl").write_text(
        json.dumps(record) + "\n" + '{"case_name": "fine", "mod\n' + '"not a record"\n'
    )
    again = run_cli("test", "-m", MODEL, "--date", DAY, "-s", "fine", cwd=root)
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert "crashed.jsonl line 2, which cannot be read back" in again.stderr
    assert "crashed.jsonl line 3, which cannot be read back" in again.stderr
    stored = runs(root)["fine"]
    assert stored["status"] == "completed"
    assert stored["input_tokens"] == row["input_tokens"]  # the stored run, not the 1e30 one

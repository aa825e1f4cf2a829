"""A warehouse server that stops answering mid-query (`kill -STOP`): `eval-pipeline test` still ends.

The server's process is stopped while the agent's query runs on it, so its sockets stay open
and its kernel keeps acknowledging, but no answer ever comes (as a hung host). The run on it
becomes an `error` run at `limits.run_timeout_s`, the run that finished before is kept, and the
command ends with its summary and results file within the run timeout plus a grace.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.warehouses.servers import (
    SLOW_QUERY,
    Server,
    frozen,
    mariadb_missing,
    mariadb_server,
    mysql_connection,
    postgres_missing,
    postgres_server,
    read_only_role,
)

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 8
#: What the command may take past the run timeout: the other runs, grading, the results file.
GRACE_S = 15
QUICK = "SELECT 1 AS one"


@pytest.fixture(params=["postgres", "mariadb"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server of its own: this test stops it."""
    missing, start = {
        "postgres": (postgres_missing, postgres_server),
        "mariadb": (mariadb_missing, mariadb_server),
    }[request.param]
    if reason := missing():
        pytest.skip(reason)
    with start() as owner:
        yield read_only_role(owner)


def _write_suite(root: Path, base_url: str, kind: str) -> Path:
    (root / "cases").mkdir(parents=True)
    (root / "eval_config.yaml").write_text(
        textwrap.dedent(f"""\
            databases:
              - {{name: finance, type: {kind}, url: "{{{{ env('FINANCE_URL') }}}}"}}
            llm:
              providers:
                - {{provider: openai, base_url: "{base_url}", timeout_s: 10}}
            test:
              models: [openai:gpt-4.1]
              threads: 1
            limits:
              run_timeout_s: {RUN_TIMEOUT_S}
            """)
    )
    (root / "cases" / "a_quick.yml").write_text("prompt: Is the server up?\n")
    (root / "cases" / "b_hangs.yml").write_text("prompt: Sum the big product.\n")
    return root


def test_a_frozen_server_costs_its_run_and_the_command_ends_in_time(tmp_path, server):
    slow = SLOW_QUERY[server.kind]

    def agent(request: RecordedRequest, _index: int) -> Step:
        text = " ".join(str(m.get("content")) for m in request.messages if m.get("role") == "user")
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        sql = QUICK if "server up" in text else slow if "big product" in text else None
        if sql is None:
            return exhausted(f"unknown prompt in {text[:80]!r}")
        return tool_calls(execute_sql(sql)) if turn == 0 else answer("Done.")

    stop = threading.Event()

    def freeze_when_the_slow_query_runs() -> None:
        while not stop.is_set():
            if _running(server, slow):
                with frozen(server.owner):
                    stop.wait(RUN_TIMEOUT_S + GRACE_S + 30)
                return
            time.sleep(0.2)

    with ScriptedServer("openai", script=agent) as llm:
        root = _write_suite(tmp_path / "suite", llm.base_url, server.kind)
        watcher = threading.Thread(target=freeze_when_the_slow_query_runs, daemon=True)
        watcher.start()
        env = {**cli_env(), "FINANCE_URL": server.url, "OPENAI_API_KEY": "sk-test-key"}
        try:
            result, ended_after_error_s = _run_timed(root, env, "error b_hangs")
        finally:
            stop.set()
            watcher.join()
    no_traceback(result)
    # The hung run ends at the run timeout; the command, after it, within the grace.
    assert ended_after_error_s < GRACE_S, f"the command ended {ended_after_error_s:.1f} s later"
    results = {r["name"]: r for r in json.loads(result.stdout)["results"]}
    assert results["a_quick"]["status"] == "passed", results["a_quick"]
    assert results["b_hangs"]["status"] == "error", results["b_hangs"]
    assert "did not finish within 8 s" in results["b_hangs"]["error"]
    assert result.returncode == 3  # an error run: the evaluation is incomplete


def _run_timed(root: Path, env: dict, line: str) -> tuple[subprocess.CompletedProcess, float]:
    """`eval-pipeline test` in `root`, and the seconds from the stderr line containing `line`
    to the command's exit (inf when it never came)."""
    child = subprocess.Popen(
        [str(SCRIPT), "test", "--date", "2026-04-01", "--format", "json"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen_at = None
    stdout: list[str] = []
    reader = threading.Thread(target=lambda: stdout.append(child.stdout.read()), daemon=True)
    reader.start()
    stderr = []
    for text in child.stderr:
        stderr.append(text)
        if line in text and seen_at is None:
            seen_at = time.monotonic()
    child.wait(timeout=RUN_TIMEOUT_S + GRACE_S + 120)
    reader.join()
    after = time.monotonic() - seen_at if seen_at is not None else float("inf")
    done = subprocess.CompletedProcess(
        child.args, child.returncode, "".join(stdout), "".join(stderr)
    )
    return done, after


def _running(server: Server, sql: str) -> bool:
    """Whether `sql` runs on the server now, asked over the owner's own session."""
    owner = server.owner
    if server.kind == "postgres":
        import psycopg

        with psycopg.connect(owner.url, connect_timeout=2) as connection:
            return bool(
                connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                    "AND query LIKE '%generate_series(1, 100000) a%' AND pid <> pg_backend_pid()"
                ).fetchone()[0]
            )
    connection = mysql_connection(owner, database=False)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW FULL PROCESSLIST")
            return any("seq_1_to_100000 a" in str(row[7]) for row in cursor.fetchall())
    finally:
        connection.close()

"""A PostgreSQL server lost in the middle of `eval-pipeline test`, then a rerun.

The suite mixes a DuckDB file and a PostgreSQL database. The test's PostgreSQL is reached
through a TCP relay this test controls: the relay is cut while the agent works on the first
server test (as a server that goes down), so that test and the next become `error` runs
naming the database; the rerun, with the relay back, executes only those two and reuses the
completed run. The store keeps which database each reference and run used.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import textwrap
import threading
from pathlib import Path

import duckdb
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
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.warehouses.small_warehouse import (
    load_statements,
)

pytestmark = pytest.mark.slow

DAY = "2026-04-01"
# test → (prompt, database, the SQL the agent runs: the reference itself)
TESTS = {
    "a_local_orders": ("How many orders in the shop?", None, "SELECT count(*) AS n FROM orders"),
    "b_finance_customers": (
        "How many customers in finance?",
        "finance",
        "SELECT count(*) AS n FROM customers",
    ),
    "c_finance_orders": ("How many finance orders?", "finance", "SELECT count(*) AS n FROM orders"),
}


class Relay:
    """A TCP relay from a fixed local port to the server; `cut` drops every connection and
    stops listening (the server is gone), `start` listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._keep(listener)
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            upstream = socket.create_connection(self.target)
            self._keep(client)
            self._keep(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def write_suite(root: Path, base_url: str) -> Path:
    (root / "cases").mkdir(parents=True)
    with duckdb.connect(str(root / "local.duckdb")) as connection:
        for statement in load_statements("duckdb"):
            connection.execute(statement)
    (root / "eval_config.yaml").write_text(
        textwrap.dedent(f"""\
            databases:
              - {{name: local, type: duckdb, path: local.duckdb}}
              - {{name: finance, type: postgres, url: "{{{{ env('FINANCE_PG_URL') }}}}"}}
            llm:
              providers:
                - {{provider: openai, base_url: "{base_url}", timeout_s: 10}}
            test:
              models: [openai:gpt-4.1]
              threads: 1
            """)
    )
    for name, (prompt, database, sql) in TESTS.items():
        text = f"prompt: {prompt}\nsql: {sql}\n" + (f"database: {database}\n" if database else "")
        (root / "cases" / f"{name}.yml").write_text(text)
    return root


def run(root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "FINANCE_PG_URL": url, "OPENAI_API_KEY": "sk-test-key"}
    result = run_cli(*args, cwd=root, env=env)
    no_traceback(result)
    return result


def test_a_server_lost_mid_run_errors_its_runs_and_a_rerun_completes_only_those(tmp_path, postgres):
    relay = Relay((postgres.host, postgres.port))
    relay.start()
    url = postgres.url.replace(f":{postgres.port}/", f":{relay.port}/")
    cut_at = TESTS["b_finance_customers"][0]
    cut = threading.Event()  # once: the rerun finds the server up

    def agent(request: RecordedRequest, _index: int) -> Step:
        text = " ".join(str(m.get("content")) for m in request.messages if m.get("role") == "user")
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        for prompt, _database, sql in TESTS.values():
            if prompt in text:
                if prompt == cut_at and turn == 0 and not cut.is_set():
                    cut.set()
                    relay.cut()  # the server goes away while the agent works on this test
                return tool_calls(execute_sql(sql)) if turn == 0 else answer("Counted.")
        return exhausted(f"unknown prompt in {text[:80]!r}")

    with ScriptedServer("openai", script=agent) as llm:
        root = write_suite(tmp_path / "suite", llm.base_url)
        first = run(root, url, "test", "--date", DAY, "--format", "json")
        assert first.returncode == 3, first.stdout + first.stderr  # error runs
        results = {r["name"]: r for r in json.loads(first.stdout)["results"]}
        assert results["a_local_orders"]["status"] == "passed"
        for name in ("b_finance_customers", "c_finance_orders"):
            assert results[name]["status"] == "error", results[name]
            assert "database 'finance' (postgres)" in results[name]["error"], results[name]
        assert postgres.password not in first.stdout + first.stderr

        relay.start()  # the server is back
        second = run(root, url, "test", "--date", DAY, "-q")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2 agent run(s) executed, 1 reused." in second.stdout
    assert "3/3 passed" in second.stdout

    stored = run(
        root,
        url,
        "sql",
        "SELECT r.name, r.database, g.database AS reference_database FROM agent_runs r "
        "JOIN reference_results g USING (name) ORDER BY r.name",
        "--format",
        "csv",
    )
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.split() == [
        "name,database,reference_database",
        "a_local_orders,local,local",
        "b_finance_customers,finance,finance",
        "c_finance_orders,finance,finance",
    ]
    relay.cut()

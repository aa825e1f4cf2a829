"""The minimal agent of docs/agent-protocol.md, as printed there, is evaluated by the real CLI and passes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from eval_pipeline_tests.agents.tiny_suite import ORDERS, write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.warehouses.servers import free_port

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[2] / "docs" / "agent-protocol.md"


def minimal_agent() -> str:
    """The Python block under the page's "A minimal agent" heading."""
    section = DOC.read_text(encoding="utf-8").split("## A minimal agent", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/agent-protocol.md has no Python block under 'A minimal agent'"
    return match.group(1)


def test_the_documented_minimal_agent_is_evaluated_and_passes(tmp_path):
    port = free_port()
    root = write_suite(
        tmp_path / "suite",
        cases={
            "order_count": {"prompt": "How many orders?", "sql": "SELECT count(*) AS n FROM orders"}
        },
        agents=[{"name": "my-agent", "url": f"http://127.0.0.1:{port}/eval"}],
        dbt=False,
    )
    code = minimal_agent().replace("8000", str(port))
    (root / "agent.py").write_text(code, encoding="utf-8")
    agent = subprocess.Popen([sys.executable, "agent.py"], cwd=root)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the documented agent did not start"
                time.sleep(0.1)
        result = run_cli("test", "--date", "2026-03-02", "-m", "http:my-agent", cwd=root)
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = json.loads(written_results(result.stdout).read_text())["results"]
    assert (run["name"], run["status"]) == ("order_count", "passed")
    assert f"There are {len(ORDERS)} orders." in run["details"]["response_text"]

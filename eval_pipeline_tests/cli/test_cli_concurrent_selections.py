"""Two `eval-pipeline test` processes evaluating different selections of one day, at once.

Each selection is answered by a slow external agent (docs/agent-protocol.md); the agent holds each first
reply until both processes have asked, so their runs stages overlap for certain. Whichever
writes last, the day's partition must end up with both selections' runs and grades.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from eval_pipeline.store import StateFolder, query
from eval_pipeline_tests.agents.servers import RecordedRequest, ScriptedServer, Step, agent_reply
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.cli.replay_suite import write_suite

pytestmark = pytest.mark.slow

DAY = "2026-04-01"
MODEL = "http:slow-agent"
REVENUE, ORDERS = ["total_revenue", "top_customer"], ["order_count", "customer_count"]


class HeldUntilBoth:
    """Holds the first reply of each process until both have asked, then answers slowly."""

    def __init__(self) -> None:
        self.meet = threading.Barrier(2, timeout=120)
        self.firsts: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest, _index: int) -> Step:
        test = request.json["test"]
        with self.lock:
            first = test in (REVENUE[0], ORDERS[0]) and test not in self.firsts
            self.firsts.add(test)
        if first:
            self.meet.wait()
        return agent_reply(f"I looked into {test}.", delay_s=0.4)


def names_on_the_day(root: Path, table: str) -> list[str]:
    frame = query(
        StateFolder(root / ".eval"),
        f"SELECT name FROM {table} WHERE run_date = ? AND model = ? ORDER BY name",
        [DAY, MODEL],
    )
    return list(frame["name"])


def test_two_selections_evaluated_at_once_both_stay_on_the_day(tmp_path):
    root = write_suite(tmp_path / "suite")
    with ScriptedServer("agent", script=HeldUntilBoth()) as agent:
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        config["agents"] = [{"name": "slow-agent", "url": agent.base_url, "timeout_s": 60}]
        config["test"]["threads"] = 1
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        processes = [
            subprocess.Popen(
                [str(SCRIPT), "test", "--date", DAY, "-m", MODEL, "-s", ",".join(selection)],
                cwd=root,
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for selection in (REVENUE, ORDERS)
        ]
        results = []
        for process in processes:
            out, err = process.communicate(timeout=300)
            results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    for result in results:
        no_traceback(result)
        assert result.returncode == 1, result.stdout + result.stderr  # text only: no data
        assert "results written to" in result.stdout + result.stderr
    everything = sorted([*REVENUE, *ORDERS])
    assert names_on_the_day(root, "agent_runs") == everything
    assert names_on_the_day(root, "grades") == everything
    summary = query(
        StateFolder(root / ".eval"),
        "SELECT total FROM model_summaries WHERE run_date = ? AND model = ?",
        [DAY, MODEL],
    )
    assert list(summary["total"]) == [len(everything)]

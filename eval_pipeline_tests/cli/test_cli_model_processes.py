"""`eval-pipeline test` with each model past the first in a process of its own.

The command keeps the first model's partition and hands every other to a worker process
(`EVAL_PIPELINE_MODEL_PROCESSES=on` forces that on a small suite). The same suite evaluated
with the workers and without gives the same verdicts, the same progress and a clean stdout;
a worker killed mid-run fails its model's partition with a message naming it, and a rerun
completes it, reusing what the killed worker had stored.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import prompt_of, write_suite
from eval_pipeline_tests.cli.console import (
    SCRIPT,
    children,
    cli_env,
    cmdline,
    no_traceback,
    run_cli_subprocess,
)

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
MODELS = ("openai:m0", "openai:m1", "openai:m2")
# test → (question, reference SQL)
TESTS = {
    "a_orders": ("How many orders are there?", "SELECT count(*) AS n FROM orders"),
    "b_customers": ("How many customers are there?", "SELECT count(*) AS n FROM customers"),
    "c_first_order": ("What is the smallest order id?", "SELECT min(order_id) AS n FROM orders"),
}


def suite(root: Path, base_url: str) -> Path:
    return write_suite(
        root,
        cases={name: {"prompt": q, "sql": sql} for name, (q, sql) in TESTS.items()},
        providers=[{"provider": "openai", "base_url": base_url, "timeout_s": 30}],
        threads=1,
        dbt=False,
    )


def queries(request: RecordedRequest) -> str:
    """Each model its own behaviour: m0 runs each test's reference, m1 the wrong table for
    the customers test, m2 never queries and answers with a guess."""
    model = request.json["model"]
    question = prompt_of(request)
    name, sql = next((n, s) for n, (q, s) in TESTS.items() if q == question)
    if model == "m1" and name == "b_customers":
        return "SELECT count(*) AS n FROM orders"
    return sql


def script(request: RecordedRequest, _index: int) -> Step:
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    if request.json["model"] == "m2":
        return answer("About a hundred.")
    return tool_calls(execute_sql(queries(request))) if turn == 0 else answer("Counted.")


def env(setting: str) -> dict[str, str]:
    return {**cli_env(), "OPENAI_API_KEY": "sk-test-key", "EVAL_PIPELINE_MODEL_PROCESSES": setting}


def evaluate(root: Path, setting: str) -> subprocess.CompletedProcess[str]:
    models = [arg for m in MODELS for arg in ("-m", m)]
    result = run_cli_subprocess(
        "test", "--date", DAY, "--format", "json", *models, cwd=root, env=env(setting)
    )
    no_traceback(result)
    return result


def verdicts(result: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], str]:
    document = json.loads(result.stdout)  # nothing but the document on stdout
    return {(r["name"], r["model"]): r["status"] for r in document["results"]}


def test_models_in_their_own_processes_give_the_verdicts_and_progress_of_one(tmp_path):
    with ScriptedServer("openai", script=script) as llm:
        template = suite(tmp_path / "template", llm.base_url)
        apart = evaluate(Path(shutil.copytree(template, tmp_path / "apart")), "on")
        together = evaluate(Path(shutil.copytree(template, tmp_path / "together")), "off")
    assert apart.returncode == together.returncode == 1, apart.stderr + together.stderr
    assert verdicts(apart) == verdicts(together)
    assert verdicts(apart)[("b_customers", "openai:m1")] == "failed"
    assert verdicts(apart)[("a_orders", "openai:m1")] == "passed"
    assert {status for (_, model), status in verdicts(apart).items() if model == "openai:m2"} == {
        "failed"
    }
    # Which models left the command's process, and a progress line for every run of each.
    assert "evaluating openai:m0\n" in apart.stderr
    for model in MODELS[1:]:
        assert f"evaluating {model} in a process of its own" in apart.stderr
        assert f"evaluating {model} in a process" not in together.stderr
    for name in TESTS:
        for model in ("m0", "m1", "m2"):
            assert f"ran {name} openai:{model}#0" in apart.stderr, apart.stderr


def descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        below = children(stack.pop())
        found += below
        stack += below
    return found


def workers_of(pid: int) -> list[int]:
    """The command's worker processes: forked from the command itself (they share its
    command line), or by the server it started when it could not (forkserver)."""
    # The recorder is forked too, into a session of its own: it is not a worker.
    forked = [
        child
        for child in children(pid)
        if cmdline(child) == cmdline(pid) and os.getsid(child) == os.getsid(pid)
    ]
    servers = [
        child for child in descendants(pid) if b"multiprocessing.forkserver" in cmdline(child)
    ]
    return forked + [worker for server in servers for worker in descendants(server)]


def test_a_killed_worker_fails_its_model_and_a_rerun_completes_it(tmp_path):
    release = threading.Event()
    held: set[str] = set()
    # m1 and m2 answer their first tests, then wait (m1 on its second, m2 on its third)
    # until the test lets them go: by then their workers stored the runs before.
    hold = {"m1": TESTS["b_customers"][0], "m2": TESTS["c_first_order"][0]}

    def slow(request: RecordedRequest, index: int) -> Step:
        model = request.json["model"]
        if hold.get(model) == prompt_of(request):
            held.add(model)
            release.wait(60)
        return script(request, index)

    models = [arg for m in MODELS for arg in ("-m", m)]
    with ScriptedServer("openai", script=slow) as llm:
        root = suite(tmp_path / "suite", llm.base_url)
        process = subprocess.Popen(
            [str(SCRIPT), "test", "--date", DAY, "--format", "json", *models],
            cwd=root,
            env=env("on"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while held != set(hold) and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.1)
            assert held == set(hold), f"only {held} reached the test they wait on"
            workers = workers_of(process.pid)
            assert len(workers) == 2, workers  # m1's and m2's: m0 stays in the command
            for worker in workers:
                os.kill(worker, signal.SIGKILL)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
        assert process.returncode == 3, stdout + stderr
        assert "the process evaluating openai:m1 ended (signal 9)" in stderr, stderr
        assert "Traceback" not in stderr

        rerun = evaluate(root, "on")
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr  # m1 and m2 fail tests
    assert "openai:m0: its inputs are unchanged, 3 stored run(s) reused" in rerun.stderr
    # What the killed workers had stored is kept: m1's first run, m2's first two.
    document = json.loads(rerun.stdout)
    assert (document["executed_runs"], document["reused_runs"]) == (3, 6), rerun.stderr
    assert len(verdicts(rerun)) == 9


def test_ctrl_c_stops_the_command_and_its_workers_with_one_line(tmp_path):
    """A terminal's Ctrl-C reaches every process of the command's group: the command says
    so once and stops its workers, whether they wait for their partitions or run them."""
    release = threading.Event()

    def slow(request: RecordedRequest, index: int) -> Step:
        release.wait(60)  # every run waits: the workers are still at work when it comes
        return script(request, index)

    models = [arg for m in MODELS for arg in ("-m", m)]
    with ScriptedServer("openai", script=slow) as llm:
        root = suite(tmp_path / "suite", llm.base_url)
        process = subprocess.Popen(
            [str(SCRIPT), "test", "--date", DAY, *models],
            cwd=root,
            env=env("on"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group, as a terminal's foreground job
        )
        try:
            deadline = time.monotonic() + 60
            # The recorder, forked beside them, counts until it has its own session: the two
            # workers are the same two a moment later.
            workers: list[int] = []
            while time.monotonic() < deadline:
                seen = workers_of(process.pid)
                time.sleep(0.2)
                if len(seen) == 2 and workers_of(process.pid) == seen:
                    workers = seen
                    break
            assert len(workers) == 2, workers_of(process.pid)
            assert len(workers) == 2, workers
            os.killpg(process.pid, signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        finally:
            release.set()
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert stderr.rstrip().endswith("interrupted") and "Traceback" not in stderr, stderr
    assert not [worker for worker in workers if Path(f"/proc/{worker}").exists()]

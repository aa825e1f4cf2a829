"""When a command evaluates models in worker processes, and what crosses back from one."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from eval_pipeline.pipeline import StageFailed
from eval_pipeline.pipeline._model_processes import (  # the unit itself: workers, their fork
    MODEL_PROCESSES_ENV,
    PROCESSES_FROM_RUNS,
    use_workers,
)


def test_a_stage_failure_sent_back_by_a_worker_keeps_its_trace_for_the_log():
    failed = StageFailed("evaluating openai:m1 failed: disk full", details="Traceback ...")
    back = pickle.loads(pickle.dumps(failed))
    assert (str(back), back.details) == (str(failed), "Traceback ...")


@pytest.mark.parametrize(
    ("setting", "models", "planned", "expected"),
    [
        ("off", 3, 10 * PROCESSES_FROM_RUNS, False),
        ("on", 2, 2, True),
        ("on", 1, 10 * PROCESSES_FROM_RUNS, False),  # one model: nothing to spread
        ("auto", 3, PROCESSES_FROM_RUNS - 1, False),  # too little work to pay for a worker
        ("", 3, PROCESSES_FROM_RUNS - 1, False),
    ],
)
def test_the_setting_decides_when_models_leave_the_command(
    monkeypatch, setting, models, planned, expected
):
    monkeypatch.setenv(MODEL_PROCESSES_ENV, setting)
    assert use_workers(models, planned) is expected


def test_auto_spreads_a_large_evaluation_on_a_machine_of_two_cores(monkeypatch):
    monkeypatch.delenv(MODEL_PROCESSES_ENV, raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    assert use_workers(3, PROCESSES_FROM_RUNS)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert not use_workers(3, PROCESSES_FROM_RUNS)


def test_an_unknown_setting_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(MODEL_PROCESSES_ENV, "sometimes")
    with pytest.raises(ValueError, match=f"{MODEL_PROCESSES_ENV} must be auto, on or off"):
        use_workers(3, PROCESSES_FROM_RUNS)


# A command with one thread forks its workers ahead; run in a process of its own, since
# pytest's has threads of its own (it would use the forkserver instead).
FORKED_AHEAD = """
import json, os, sys, threading
from eval_pipeline.pipeline._model_processes import (  # the unit itself: workers forked ahead
    WorkerDied, dismiss_workers, prepare_workers, run_in_workers,
)

class Job:
    def __init__(self, model):
        self.model = model
    def evaluate(self):
        if self.model == "dies":
            os._exit(7)
        return {"model": self.model, "pid": os.getpid(), "parent": os.getppid()}

def children():
    found = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as listed:
            found += [int(pid) for pid in listed.read().split()]
    return sorted(found)

models = sys.argv[1:]
prepare_workers(len(models) - 1)
ahead = children()  # forked now, before any job exists
outcomes = run_in_workers(
    [Job(model) for model in models], 4, died=lambda job, error: {"died": str(error)}
)
# Asked for more than they ran: the others are dismissed, and none is left over.
prepare_workers(2)
spare = children()
dismiss_workers()
print(json.dumps({"ahead": ahead, "outcomes": outcomes, "spare": len(spare), "left": children()}))
"""


def _forked_ahead(*models: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", FORKED_AHEAD, *models],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != MODEL_PROCESSES_ENV},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork ahead on Linux")
def test_workers_forked_ahead_run_the_partitions_and_none_outlives_the_evaluation():
    found = _forked_ahead("m0", "m1", "m2")
    first, *others = found["outcomes"]
    assert [o["model"] for o in found["outcomes"]] == ["m0", "m1", "m2"]
    assert first["pid"] != others[0]["pid"]  # m0 stays in the command, the others left it
    assert sorted(o["pid"] for o in others) == found["ahead"]  # the workers forked ahead
    assert {o["parent"] for o in others} == {first["pid"]}  # forked from the command
    assert found["spare"] == 2 and found["left"] == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork ahead on Linux")
def test_a_worker_forked_ahead_that_dies_fails_only_its_partition():
    found = _forked_ahead("m0", "dies", "m2")
    assert found["outcomes"][1] == {
        "died": "the process evaluating dies ended (exit code 7) before it finished; "
        "the runs it stored are kept and reused by the next evaluation"
    }
    assert found["outcomes"][2]["model"] == "m2" and found["left"] == []


# A Ctrl-C that arrives while the workers are forked: here sent by the process itself from
# a fork handler, so it is pending at the moment the standard library's own handlers run.
INTERRUPTED_WHILE_FORKING = """
import os, signal, sys
from eval_pipeline.pipeline import _model_processes as processes  # the unit itself: its fork

os.register_at_fork(before=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    processes.prepare_workers(2)
except KeyboardInterrupt:
    kept = len(processes._AHEAD.workers)
    processes.dismiss_workers()
    print(f"interrupted, {kept} workers kept and dismissed")
else:
    print("the interrupt was lost")
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork ahead on Linux")
def test_a_ctrl_c_while_the_workers_are_forked_stops_the_command_and_them():
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_WHILE_FORKING],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.strip() == "interrupted, 2 workers kept and dismissed", result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr

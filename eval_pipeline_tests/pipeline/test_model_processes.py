"""When a command evaluates models in worker processes, and what crosses back from one."""

from __future__ import annotations

import pickle

import pytest

from eval_pipeline.pipeline import StageFailed
from eval_pipeline.pipeline._model_processes import (
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

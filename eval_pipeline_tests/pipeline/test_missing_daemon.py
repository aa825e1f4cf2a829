"""Runs queued in the instance with no daemon to start them: the command line says so."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.defs import instance as instance_module
from eval_pipeline.defs.evaluate import run_evaluation
from eval_pipeline.defs.instance import instance_home, open_instance, waiting_on_a_daemon
from eval_pipeline.pipeline import EvaluationRequest, today
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.pipeline.small_suite import MODELS


def queue_a_run(instance: dg.DagsterInstance) -> None:
    """A run as the UI's launch leaves it for the daemon: queued, with the code location it
    would be launched from (Dagster requires one of a queued run; no public constructor)."""
    from dagster._core.remote_origin import (
        InProcessCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    location = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="eval_pipeline.definitions")
    )
    origin = RemoteJobOrigin(
        repository_origin=RemoteRepositoryOrigin(location, "__repository__"),
        job_name="evaluate_model_day",
    )
    instance.add_run(
        dg.DagsterRun(
            job_name="evaluate_model_day",
            status=dg.DagsterRunStatus.QUEUED,
            remote_job_origin=origin,
        )
    )


def test_a_queue_nobody_serves_is_named_with_what_to_start(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        assert waiting_on_a_daemon(instance, home, patience_s=0) is None  # nothing queued
        queue_a_run(instance)
        queue_a_run(instance)
        assert waiting_on_a_daemon(instance, home) is None  # queued just now: give it a minute
        line = waiting_on_a_daemon(instance, home, patience_s=0)
    assert line is not None
    assert line.startswith(f"2 run(s) in the Dagster instance {home} have been queued")
    assert "no Dagster daemon is running" in line and "eval-pipeline ui" in line


@pytest.mark.slow  # an evaluation through Dagster
def test_the_evaluation_reports_runs_the_ui_left_waiting(small_suite, monkeypatch):
    suite = load_suite(small_suite.root)
    home = instance_home(suite.config)
    with open_instance(home, command_line=True) as instance:
        queue_a_run(instance)
    monkeypatch.setattr(instance_module, "QUEUE_PATIENCE_S", 0.0)
    result = run_evaluation(suite, EvaluationRequest(models=(MODELS[0],), run_date=today()))
    (notice,) = result.notices
    assert notice.startswith("1 run(s) in the Dagster instance") and "dagster-daemon run" in notice
    assert result.executed == 4  # the evaluation itself ran as always

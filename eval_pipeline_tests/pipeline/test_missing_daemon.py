"""Runs queued in the instance with no daemon to start them: `eval-pipeline test` says so.

The UI's "Materialize" (or a schedule, a backfill) queues runs for the Dagster daemon; with
none running they sit as "Queued" and nothing else says why. The command, which needs no
daemon, names them and what to start, read from the instance's own run storage.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.pipeline import queued_unserved
from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, FIRST_MODELS_ARGS, write_suite


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


def queued_minutes_ago(home: Path, minutes: float) -> None:
    """Every queued run of the instance as if launched `minutes` ago (Dagster stamps a run
    when it is added; a queue nobody serves is one that waited)."""
    then = (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(home / "history" / "runs.db") as db:
        db.execute("UPDATE runs SET create_timestamp = ? WHERE status = 'QUEUED'", (then,))


@pytest.mark.slow  # a Dagster instance
def test_a_queue_nobody_serves_is_named_with_what_to_start(tmp_path):
    """Read from the run storage Dagster writes: its runs and its daemons' heartbeats."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    assert queued_unserved(home) is None  # no instance yet
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        assert queued_unserved(home, patience_s=0) is None  # nothing queued
        queue_a_run(instance)
        queue_a_run(instance)
        assert queued_unserved(home) is None  # queued just now: give it a minute
        line = queued_unserved(home, patience_s=0)
        assert line is not None
        assert line.startswith(f"2 run(s) in the Dagster instance {home} have been queued")
        assert "no Dagster daemon is running" in line and "eval-pipeline ui" in line

        # Queued two minutes ago: a queue nobody served for a minute, until a daemon beats.
        queued_minutes_ago(home, 2)
        assert queued_unserved(home) is not None
        from dagster._daemon.types import DaemonHeartbeat

        now = datetime.now(UTC).timestamp()
        instance.add_daemon_heartbeat(DaemonHeartbeat(now, "QUEUED_RUN_COORDINATOR", "d1", None))
        assert queued_unserved(home) is None


@pytest.mark.slow  # evaluations through the command
def test_the_command_names_runs_the_ui_left_waiting(tmp_path):
    root = write_suite(tmp_path / "suite")
    first = run_cli("test", "--date", DAY, *FIRST_MODELS_ARGS, cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "queued" not in first.stdout + first.stderr

    home = root / ".eval" / "dagster_home"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        queue_a_run(instance)
    queued_minutes_ago(home, 2)

    # An unchanged rerun (no stage runs) says it, as an evaluation that runs its stages does.
    again = run_cli("test", "--date", DAY, *FIRST_MODELS_ARGS, cwd=root)
    no_traceback(again)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing changed since the last evaluation" in again.stdout
    output = again.stdout + again.stderr
    notes = [line for line in output.splitlines() if line.startswith("note: ")]
    assert notes == [
        f"note: 1 run(s) in the Dagster instance {home} have been queued for over 60 s and no "
        "Dagster daemon is running, so none will start: `eval-pipeline ui` runs one, or start "
        "`dagster-daemon run` on this instance"
    ], output

    other_day = run_cli("test", "--date", "2026-01-02", *FIRST_MODELS_ARGS, cwd=root)
    assert other_day.returncode == 0, other_day.stdout + other_day.stderr
    assert "no Dagster daemon is running" in other_day.stdout + other_day.stderr

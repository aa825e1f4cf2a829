"""A deployment in miniature: deploy/dagster.yaml on a throwaway PostgreSQL, the store in a bucket
(moto_server), `dagster-webserver` and `dagster-daemon` started by the test. A backfill of two
model partitions launched through the UI's API runs as separate run-worker processes, at once,
while a reader queries the history; every count is exact. (Two prove "separate, at once" as
three would; each run is a worker and a process per step, each loading the definitions.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import httpx
import pytest

from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline_tests.cli.console import DEPLOY, production_env
from eval_pipeline_tests.pipeline.processes import READ_BUCKET_IN_A_LOOP, count, finish, start
from eval_pipeline_tests.pipeline.services import (
    LAUNCH_BACKFILL,
    dagster_daemon,
    dagster_webserver,
    wait_for,
)
from eval_pipeline_tests.pipeline.small_suite import DAY, EVALUATION, SmallSuite, prepare
from eval_pipeline_tests.store.buckets import Bucket
from eval_pipeline_tests.warehouses.servers import (
    Server,
)

pytestmark = pytest.mark.slow

MODELS = ("openai:gpt-a", "openai:gpt-b")
WAITING = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED)


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    """The run worker: the process that logged the run's start."""
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START):
        return record.dagster_event.pid
    raise AssertionError(f"run {run_id} never started")


def step_pids(instance: dg.DagsterInstance, run_id: str) -> set[int]:
    """The processes the run's steps started in."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
    return {record.dagster_event.pid for record in records}


def test_a_backfill_of_two_models_runs_in_run_workers_on_postgres_and_the_bucket(
    small_suite: SmallSuite, bucket: Bucket, dagster_postgres: Server, tmp_path: Path
):
    small_suite.config["store"] = bucket.store_config
    small_suite.write_config(models=list(MODELS), threads=2)
    small_suite.agent.latency_s = 0.2  # the runs overlap while the reader reads
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    env = {**production_env(home, dagster_postgres), "EVAL_SUITE_DIR": str(small_suite.root)}
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.add_dynamic_partitions("models", list(MODELS))
            prepare(small_suite, instance)  # inputs and the day's references, as the schedule does

        logs = [tmp_path / "webserver.log", tmp_path / "daemon.log"]  # the services' logs
        # The daemon starts once the backfill is launched: its backfill daemon looks at start,
        # then every 30 s, so one already running would sit out most of a tick before the
        # backfill's first iteration. Webserver and daemon still run together, on one instance.
        with dagster_webserver(env, tmp_path, timeout_s=180) as port:
            graphql = f"http://127.0.0.1:{port}/graphql"
            params = {
                "partitionNames": [str(model_day_key(m, DAY)) for m in MODELS],
                "assetSelection": [{"path": [name]} for name in EVALUATION],
                "fromFailure": False,
            }
            answer = httpx.post(
                graphql,
                json={"query": LAUNCH_BACKFILL, "variables": {"params": params}},
                timeout=120,
            ).json()
            launched = answer["data"]["launchPartitionBackfill"]
            assert launched["__typename"] == "LaunchBackfillSuccess", answer

            with (
                dagster_daemon(env, tmp_path),
                dg.DagsterInstance.from_config(str(home)) as instance,
            ):

                def backfill_runs() -> list[dg.DagsterRun]:
                    return list(
                        instance.get_runs(
                            dg.RunsFilter(tags={"dagster/backfill": launched["backfillId"]})
                        )
                    )

                def started() -> bool:
                    return any(r.status not in WAITING for r in backfill_runs())

                def finished() -> bool:
                    runs = backfill_runs()
                    return len(runs) == len(MODELS) and all(r.is_finished for r in runs)

                # The reader starts with the first run worker, seconds before any step writes:
                # each of its reads costs it and moto_server CPU the runs need, and until then
                # (the daemon's pick-up, the queue) there is nothing to read.
                wait_for("no run of the backfill started", started, timeout_s=300, logs=logs)
                stop = tmp_path / "stop"
                reader = start(
                    READ_BUCKET_IN_A_LOOP,
                    str(small_suite.root),
                    str(stop),
                    log=tmp_path / "reader.log",
                )
                try:
                    wait_for("the backfill did not finish", finished, timeout_s=420, logs=logs)
                finally:
                    stop.touch()
                runs = backfill_runs()
                stats = [instance.get_run_stats(r.run_id) for r in runs]
                pids = {r.run_id: worker_pid(instance, r.run_id) for r in runs}
                steps = {r.run_id: step_pids(instance, r.run_id) for r in runs}
            reading = finish(reader, tmp_path / "reader.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)

    daemon_log = logs[1].read_text()[-3000:]
    assert sorted(r.status.value for r in runs) == ["SUCCESS"] * len(MODELS), daemon_log
    assert {r.tags["dagster/partition"] for r in runs} == {
        str(model_day_key(m, DAY)) for m in MODELS
    }
    # Each run executed in a process of its own, launched by the daemon (not this process),
    # and they ran at once (within the queue's limit of 8).
    assert len(set(pids.values())) == len(MODELS) and os.getpid() not in pids.values()
    # Its steps ran in that process, not in one started (and loading the code) per step.
    assert all(steps[run_id] == {pid} for run_id, pid in pids.items()), (steps, pids)
    spans = sorted((s.start_time, s.end_time) for s in stats)
    assert spans[1][0] < spans[0][1], spans
    assert reading["reads"] > 0 and reading["partial"] == []
    assert count(small_suite, "agent_runs") == 4 * len(MODELS)
    assert count(small_suite, "grades") == 4 * len(MODELS)
    assert count(small_suite, "model_summaries") == len(MODELS)

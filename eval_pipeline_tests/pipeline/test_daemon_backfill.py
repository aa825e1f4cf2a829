"""A deployment in miniature: deploy/dagster.yaml on a throwaway PostgreSQL, the store in a bucket
(moto_server), `dagster-webserver` and `dagster-daemon` started by the test.

The command line evaluates today, a test is edited, and it evaluates again: its history is in
the same instance, beside a past day's inputs. Then a backfill of that day's evaluation and
report is launched through the UI's API, tagged `eval_pipeline/evaluate_new` = true as the
launch dialog's "Add tags" tags it: the day was never evaluated, and only a launch that asks
for it evaluates a new (model, day) from the asset graph. Its two model partitions run as separate run-worker
processes, at once, each one run for its runs, grades and summary, while a reader queries the
history; the day's report lands and every count is exact. (Two prove "separate, at once" as
three would; each run is a worker loading the definitions.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import httpx
import pytest

from eval_pipeline.defs.evaluate import run_evaluation
from eval_pipeline.defs.launched import EVALUATE_NEW_TAG
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.pipeline import EvaluationRequest, today
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.cli.console import DEPLOY, production_env
from eval_pipeline_tests.pipeline.processes import READ_BUCKET_IN_A_LOOP, count, finish, start
from eval_pipeline_tests.pipeline.services import (
    LAUNCH_BACKFILL,
    dagster_daemon,
    dagster_webserver,
    wait_for,
)
from eval_pipeline_tests.pipeline.small_suite import DAY, EVALUATION, SmallSuite
from eval_pipeline_tests.store.buckets import Bucket
from eval_pipeline_tests.warehouses.servers import (
    Server,
)

pytestmark = pytest.mark.slow

MODELS = ("openai:gpt-a", "openai:gpt-b")
WAITING = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED)
REPORT = ("leaderboard", "report")


def day_and_report(day: str, models: tuple[str, ...]) -> list[dict]:
    """The UI's "materialize" of a day's evaluation and report: each asset's partitions
    (`partitionsByAssets`, as the launchpad sends them for assets of different partitions)."""
    one_day = {"ranges": [{"start": day, "end": day}]}
    keys = [str(model_day_key(m, day)) for m in models]
    per_model = {"ranges": [{"start": keys[0], "end": keys[-1]}]}
    return [{"assetKey": {"path": [name]}, "partitions": one_day} for name in REPORT] + [
        {"assetKey": {"path": [name]}, "partitions": per_model} for name in EVALUATION
    ]


def command_line_history(suite: SmallSuite, home: Path) -> str:
    """`eval-pipeline test` of today, an edit of a test, `eval-pipeline test` again; then the
    past day's inputs as its `day_inputs` run makes them (the schedule's first run). The day
    evaluated (today then: the test after it may end on the next day)."""
    request = EvaluationRequest(models=MODELS, run_date=today())
    run_evaluation(load_suite(suite.root), request)
    suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")
    run_evaluation(load_suite(suite.root), request)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        inputs = suite.definitions().resolve_job_def("day_inputs")
        # Tagged as the schedule tags it: automation leaves its day to the schedule's chain.
        tags = {"eval_pipeline/source": "schedule"}
        assert inputs.execute_in_process(instance=instance, partition_key=DAY, tags=tags).success
    return request.run_date.isoformat()


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
        command_line_day = command_line_history(small_suite, home)

        logs = [tmp_path / "webserver.log", tmp_path / "daemon.log"]  # the services' logs
        # The daemon starts once the backfill is launched: its backfill daemon looks at start,
        # then every 30 s, so one already running would sit out most of a tick before the
        # backfill's first iteration. Webserver and daemon still run together, on one instance.
        with dagster_webserver(env, tmp_path, timeout_s=180) as port:
            graphql = f"http://127.0.0.1:{port}/graphql"
            params = {
                "partitionsByAssets": day_and_report(DAY, MODELS),
                "fromFailure": False,
                "tags": [
                    {"key": "dagster/from_ui", "value": "true"},
                    {"key": EVALUATE_NEW_TAG, "value": "true"},
                ],
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
                    backfill = instance.get_backfill(launched["backfillId"])
                    return backfill.status.value != "REQUESTED" and all(
                        r.is_finished for r in backfill_runs()
                    )

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
                every_run = backfill_runs()
                # What each run of a (model, day) partition materialized: one run each.
                made = {
                    r.run_id: [
                        record.event_log_entry.dagster_event.asset_key.to_user_string()
                        for record in instance.get_records_for_run(
                            r.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                        ).records
                    ]
                    for r in every_run
                    if "|" in r.tags.get("dagster/partition", "")
                }
                partition_runs = [r for r in every_run if r.run_id in made]
                runs = [r for r in partition_runs if "agent_runs" in made[r.run_id]]
                stats = [instance.get_run_stats(r.run_id) for r in runs]
                pids = {r.run_id: worker_pid(instance, r.run_id) for r in runs}
                steps = {r.run_id: step_pids(instance, r.run_id) for r in runs}
                reported = set(instance.get_materialized_partitions(dg.AssetKey("report")))
            reading = finish(reader, tmp_path / "reader.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)

    daemon_log = logs[1].read_text()[-3000:]
    assert {r.status.value for r in every_run} == {"SUCCESS"}, daemon_log
    # One run per partition: its runs, grades and summary, each once.
    assert {r.tags["dagster/partition"]: sorted(made[r.run_id]) for r in partition_runs} == {
        str(model_day_key(m, DAY)): sorted(EVALUATION) for m in MODELS
    }
    assert len(partition_runs) == len(MODELS)
    assert reported == {command_line_day, DAY}  # the command line's day and the backfill's
    assert {r.tags["dagster/partition"] for r in runs} == {
        str(model_day_key(m, DAY)) for m in MODELS
    }
    # Each model's runs executed in a process of its own, launched by the daemon (not this
    # process), and they ran at once (within the queue's limit of 8).
    assert len(set(pids.values())) == len(MODELS) and os.getpid() not in pids.values()
    # Its steps ran in that process, not in one started (and loading the code) per step.
    assert all(steps[run_id] == {pid} for run_id, pid in pids.items()), (steps, pids)
    spans = sorted((s.start_time, s.end_time) for s in stats)
    assert spans[1][0] < spans[0][1], spans
    assert reading["reads"] > 0 and reading["partial"] == []
    # Two days of two models, four tests each: the command line's today and the backfill's day.
    assert count(small_suite, "agent_runs") == 2 * 4 * len(MODELS)
    assert count(small_suite, "grades") == 2 * 4 * len(MODELS)
    assert count(small_suite, "model_summaries") == 2 * len(MODELS)

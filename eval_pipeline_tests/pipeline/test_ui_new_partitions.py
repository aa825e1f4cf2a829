""" "Materialize unsynced" in the Dagster UI never evaluates a (model, day) that was never evaluated.

One model is evaluated today; the suite's partitions are yesterday and today for two models,
so three of the four (model, day) partitions were never evaluated. With `dagster-webserver` and
`dagster-daemon` running over the suite's instance, the backfill the UI's "Materialize
unsynced" launches for the evaluation and report assets (every partition, tagged as the UI
tags it) is sent to the webserver's GraphQL. The agent under test is asked nothing: the
evaluated partition is redone from what it reused, and each never-evaluated one is refused
with the ways to ask for it.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest

from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.defs.watch import observe_settings
from eval_pipeline.pipeline import today
from eval_pipeline.suite import load_config
from eval_pipeline_tests.pipeline.services import (
    LAUNCH_BACKFILL,
    dagster_daemon,
    dagster_webserver,
    wait_for,
)
from eval_pipeline_tests.pipeline.small_suite import (
    EVALUATION,
    MODELS,
    agent_requests,
    evaluate,
    prepare,
)

pytestmark = pytest.mark.slow

# What "Materialize unsynced" selects after a test edit: every materializable asset the UI
# shows unsynced or missing; of different partitions, so one backfill of all of their
# partitions (`allPartitions`), tagged `dagster/from_ui` as the UI tags every launch.
UNSYNCED = [*EVALUATION, "leaderboard", "report"]


def step_failures(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [
        str(record.dagster_event.event_specific_data)
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    ]


def test_materialize_unsynced_never_evaluates_a_day_never_evaluated(small_suite, tmp_path: Path):
    day = today()
    yesterday = (day - timedelta(days=1)).isoformat()
    small_suite.write_config(start_date=yesterday)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        defs = prepare(small_suite, instance, day.isoformat())
        observe_settings(instance, load_config(small_suite.root), MODELS, UNNAMED)
        evaluate(defs, instance, MODELS[0], day.isoformat())
    evaluated = str(model_day_key(MODELS[0], day.isoformat()))
    never = {str(model_day_key(m, d)) for m in MODELS for d in (yesterday, day.isoformat())}
    never.discard(evaluated)
    asked_before = agent_requests(small_suite.agent)

    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_SUITE_DIR": str(small_suite.root)}
    logs = [tmp_path / "webserver.log", tmp_path / "daemon.log"]
    with dagster_webserver(env, tmp_path) as port:
        params = {
            "assetSelection": [{"path": [name]} for name in UNSYNCED],
            "allPartitions": True,
            "tags": [{"key": "dagster/from_ui", "value": "true"}],
        }
        answer = httpx.post(
            f"http://127.0.0.1:{port}/graphql",
            json={"query": LAUNCH_BACKFILL, "variables": {"params": params}},
            timeout=120,
        ).json()
        launched = answer["data"]["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", answer
        backfill_id = launched["backfillId"]

        with dagster_daemon(env, tmp_path), dg.DagsterInstance.from_config(str(home)) as instance:

            def runs() -> list[dg.DagsterRun]:
                return list(
                    instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
                )

            def finished() -> bool:
                backfill = instance.get_backfill(backfill_id)
                return backfill.status.value != "REQUESTED" and all(r.is_finished for r in runs())

            wait_for("the backfill did not finish", finished, timeout_s=540, logs=logs)
            by_partition = {r.tags["dagster/partition"]: r for r in runs()}
            failures = {key: step_failures(instance, r.run_id) for key, r in by_partition.items()}
            made = set(instance.get_materialized_partitions(dg.AssetKey("agent_runs")))

    # Not one agent request: the evaluated partition reused its runs, the others never ran.
    assert agent_requests(small_suite.agent) == asked_before
    assert made == {evaluated}
    assert by_partition[evaluated].status is dg.DagsterRunStatus.SUCCESS
    for key in never:
        assert by_partition[key].status is dg.DagsterRunStatus.FAILURE, key
        (failure,) = failures[key]
        assert "was never evaluated" in failure and "evaluate_model_day" in failure, failure
        assert "eval_pipeline/evaluate_new=true" in failure, failure

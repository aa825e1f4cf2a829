"""One (model, day) materialized from the asset page of `agent_runs`, with Dagster's webserver and daemon running: one run does its whole chain.

Both models are evaluated today, with the day's leaderboard and report. Then
`dagster-webserver` and `dagster-daemon` run over the suite's instance, and the run the asset
page's "Materialize…" launches for one partition (the asset alone, in the asset graph's job,
tagged as the UI tags it) is sent to the webserver's GraphQL. That run grades and summarizes
the partition and writes the day's leaderboard and report, each recorded with its provenance
and the run's id; the daemon's automation launches nothing after it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.defs.reporting import EVALUATION_TAG
from eval_pipeline.defs.watch import observe_settings
from eval_pipeline.pipeline import today
from eval_pipeline.suite import load_config
from eval_pipeline_tests.pipeline.automation import fresh, watch_tick
from eval_pipeline_tests.pipeline.services import LAUNCH_RUN, dagster_services, graphql, wait_for
from eval_pipeline_tests.pipeline.small_suite import MODELS, evaluate, materialize, prepare

pytestmark = pytest.mark.slow

LEADERBOARD = ("leaderboard", "report")  # daily; the others by model and day
TICKS = "Checking for new runs for sensor: evaluation_automation"


def test_one_partition_from_the_asset_page_is_one_run(small_suite, tmp_path: Path):
    day = today().isoformat()
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        # The suite's files and settings observed before anything reads them, as the command
        # line and the watch sensor's first tick do (a later first observation would unsync
        # what read them, and automation would wait on it).
        watch_tick(small_suite.definitions(), instance)
        observe_settings(instance, load_config(small_suite.root), MODELS, UNNAMED)
        defs = prepare(small_suite, instance, day)
        for model in MODELS:
            evaluate(defs, instance, model, day)
        assert materialize(
            defs, ["leaderboard", "report"], instance=instance, partition_key=day
        ).success

    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_SUITE_DIR": str(small_suite.root)}
    logs = tmp_path / "logs"
    wait = [logs / "webserver.log", logs / "daemon.log"]
    partition = str(model_day_key(MODELS[0], day))
    with dagster_services(env, logs) as port, dg.DagsterInstance.from_config(str(home)) as instance:
        base = f"http://127.0.0.1:{port}"
        # The automation's first tick is over (the second has started): what it found of
        # the evaluation above is no part of what the launch below leads to.
        wait_for(
            "the automation sensor never ticked twice",
            lambda: (logs / "daemon.log").read_text().count(TICKS) >= 2,
            timeout_s=240,
            logs=wait,
        )
        before = {run.run_id for run in instance.get_runs()}
        launched = graphql(
            base,
            LAUNCH_RUN,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": "eval_pipeline",
                        "repositoryName": "__repository__",
                        "jobName": "__ASSET_JOB",
                        "assetSelection": [{"path": ["agent_runs"]}],
                    },
                    "runConfigData": {},
                    "executionMetadata": {
                        "tags": [
                            {"key": "dagster/partition", "value": partition},
                            {"key": "dagster/from_ui", "value": "true"},
                        ]
                    },
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched

        def reports() -> int:
            return len(
                instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey("report"), asset_partitions=[day]),
                    limit=10,
                ).records
            )

        wait_for(
            "the day's report was not written again",
            lambda: reports() == 2,
            timeout_s=420,
            logs=wait,
        )
        settled = (logs / "daemon.log").read_text().count(TICKS)
        # two more ticks of the automation: nothing else is launched after the report
        wait_for(
            "the automation sensor stopped ticking",
            lambda: (logs / "daemon.log").read_text().count(TICKS) >= settled + 2,
            timeout_s=240,
            logs=wait,
        )
        time.sleep(5)
        runs = [run for run in instance.get_runs() if run.run_id not in before]
        latest = {
            asset: instance.fetch_materializations(
                dg.AssetRecordsFilter(
                    asset_key=dg.AssetKey(asset),
                    asset_partitions=[day if asset in LEADERBOARD else partition],
                ),
                limit=1,
            ).records[0]
            for asset in ("grades", "model_summaries", "leaderboard", "report")
        }
        # As the UI shows them: not unsynced, their lineage read from the reported events.
        defs = small_suite.definitions()
        unsynced = [
            asset
            for asset in latest
            if not fresh(defs, instance, asset, day if asset in LEADERBOARD else partition)
        ]
        made = {
            run.run_id: sorted(
                record.event_log_entry.dagster_event.asset_key.to_user_string()
                for record in instance.get_records_for_run(
                    run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                ).records
            )
            for run in runs
        }

    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}, runs
    assert [(r.tags.get("dagster/partition"), made[r.run_id]) for r in runs] == [
        (partition, ["agent_runs"]),
    ]
    [run] = runs
    # The rest of the chain was done by that run, and says so.
    assert {
        asset: record.asset_materialization.tags.get(EVALUATION_TAG)
        for asset, record in latest.items()
    } == dict.fromkeys(latest, run.run_id)
    assert unsynced == []

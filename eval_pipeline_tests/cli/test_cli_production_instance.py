"""deploy/dagster.yaml on a throwaway PostgreSQL: `eval-pipeline test` with DAGSTER_HOME pointing
at it (and the store in a bucket) runs without a daemon and records its evaluation in
PostgreSQL."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest
import yaml

from eval_pipeline_tests.cli.console import (
    DEPLOY,
    SCRIPT,
    no_traceback,
    production_env,
    sql_rows,
    stages_of,
)
from eval_pipeline_tests.cli.replay_suite import (
    FIRST_MODELS_ARGS,
    GRADES_SQL,
    VERDICTS,
    set_store,
    write_suite,
)
from eval_pipeline_tests.store.buckets import Bucket
from eval_pipeline_tests.warehouses.servers import Server

pytestmark = pytest.mark.slow

DAY = "2026-04-01"


def test_the_cli_records_its_evaluation_in_the_postgres_instance_dagster_home_names(
    dagster_postgres: Server, bucket: Bucket, tmp_path: Path
):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    root = write_suite(tmp_path / "suite")
    set_store(root, bucket.store_config)
    env = production_env(home, dagster_postgres)

    result = subprocess.run(
        [str(SCRIPT), "test", "--date", DAY, *FIRST_MODELS_ARGS],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sql_rows(root, GRADES_SQL) == VERDICTS  # the results are in the bucket

    # The evaluation is recorded in PostgreSQL as the command's work outside a run (no run
    # for the daemon to pick up): its inputs, each model's partition, its report. The suite
    # got no instance of its own, and the instance file was used as shipped (nothing written
    # into DAGSTER_HOME's yaml).
    with psycopg.connect(
        host=dagster_postgres.host,
        port=dagster_postgres.port,
        user=dagster_postgres.user,
        password=dagster_postgres.password,
        dbname=dagster_postgres.dbname,
    ) as connection:
        runs = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert runs == 0
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        recorded = stages_of(root, home)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    models = len(FIRST_MODELS_ARGS) // 2
    assert sorted(kind for kind, _ in recorded) == ["inputs", *["model"] * models, "report"]
    assert len({partition for _, partition in recorded if partition}) == models, recorded
    assert not (root / ".eval" / "dagster_home").exists()
    assert (home / "dagster.yaml").read_text() == (DEPLOY / "dagster.yaml").read_text()
    assert dagster_postgres.password not in result.stdout + result.stderr


def test_the_production_instance_queues_runs_for_the_daemon(dagster_postgres: Server, tmp_path):
    """The shipped file loads as it is: PostgreSQL storages, the queue and its limits."""
    import dagster as dg
    from dagster._core.run_coordinator import QueuedRunCoordinator

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    saved = dict(os.environ)
    os.environ.update(production_env(home, dagster_postgres))
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
            assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
            limits = instance.get_concurrency_config().run_queue_config
            assert limits.max_concurrent_runs == 8
            assert {t["key"] for t in limits.tag_concurrency_limits} == {
                "dagster/partition",
                "eval_pipeline/provider",
            }
    finally:
        os.environ.clear()
        os.environ.update(saved)
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == "eval_pipeline.definitions"

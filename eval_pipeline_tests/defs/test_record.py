"""The Dagster record of a command's evaluation: `eval-pipeline test` does the work in its own
process, and its recorder reports each materialization and check result to the suite's
instance as Dagster records work done outside a run (no run is executed, no model asked
again), with the versions a run would give them; a record is never written twice."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.evaluate import (
    EvaluationFailed,
    EvaluationRequest,
    build_missing_warehouse,
    run_evaluation,
)
from eval_pipeline.defs.launched import LAUNCHED_BY_TAG
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.defs.record import EVALUATION_TAG, record_pending
from eval_pipeline.pipeline import instance_home, pending_records, run_stages, stages
from eval_pipeline.suite import load_config, load_suite
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.agents.tiny_suite import DAY, ROUTINE, write_suite
from eval_pipeline_tests.cli.console import run_cli, run_cli_subprocess
from eval_pipeline_tests.conftest import copy_sample_suite

pytestmark = pytest.mark.slow

MODEL = "openai:gpt-4.1"
PARTITION = model_day_key(MODEL, DAY.isoformat())


@pytest.fixture(autouse=True)
def _dagster_home_restored(monkeypatch):
    """Each test names the instance it reads; none inherits one from the environment."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


@pytest.fixture
def server():
    with ScriptedServer("openai") as scripted:
        scripted.set_script(ROUTINE)
        yield scripted


def _suite(root: Path, server: ScriptedServer) -> Path:
    return write_suite(
        root,
        cases={"orders": "How many orders?", "customers": "How many customers?"},
        providers=[{"provider": "openai", "base_url": server.base_url, "api_key": "sk-test"}],
        dbt=False,
    )


def _instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(home))


def _latest(instance: dg.DagsterInstance, asset: str, partition: str | None = None):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            dg.AssetKey(asset), asset_partitions=[partition] if partition else None
        ),
        limit=1,
    ).records
    return records[0].asset_materialization if records else None


def _check_results(instance: dg.DagsterInstance, check: str) -> list:
    key = dg.AssetCheckKey(dg.AssetKey("model_summaries"), check)
    return instance.event_log_storage.get_asset_check_execution_history(key, limit=10)


def _recorded(home: Path) -> None:
    """Wait until the command's recorder has written its record (bounded, for a loaded
    machine: the recorder ends within a moment of the command)."""
    deadline = time.monotonic() + 120
    while pending_records(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pending_records(home), "the command's record was never written"


def test_the_command_leaves_its_evaluation_in_the_instance_with_no_run_and_no_model_asked_again(
    tmp_path, server
):
    root = _suite(tmp_path / "suite", server)
    done = run_cli_subprocess("test", "-m", MODEL, "--date", DAY.isoformat(), cwd=root)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert len(server.requests) == 4  # two tests, a query and an answer each
    home = instance_home(load_suite(root).config)
    _recorded(home)

    with _instance(home) as instance:
        assert instance.get_runs() == [], "the record executed a Dagster run"
        runs = _latest(instance, "agent_runs", PARTITION)
        assert runs is not None and runs.metadata["executed"].value == 2
        # Dagster's own provenance: what the runs read, as a step of a run records it.
        assert runs.tags["dagster/input_data_version/test_cases"] == load_suite(root).hash
        for asset in ("test_cases", "reference_results", "agent_runs", "grades", "report"):
            event = _latest(instance, asset)
            assert event.tags[LAUNCHED_BY_TAG] == "cli", asset
            assert "dagster/data_version" in event.tags and "dagster/code_version" in event.tags
        [regression] = _check_results(instance, "no_regression")
        assert regression.partition == PARTITION  # the check's history says which it was
    assert len(server.requests) == 4, "recording the evaluation asked the model again"


def test_a_partition_evaluated_again_keeps_every_check_result_in_its_history(tmp_path, server):
    root = _suite(tmp_path / "suite", server)
    for _ in range(2):
        result = run_cli("test", "-m", MODEL, "--date", DAY.isoformat(), "--no-cache", cwd=root)
        assert result.returncode in (0, 1), result.stdout + result.stderr
    home = instance_home(load_suite(root).config)
    assert not pending_records(home) and not list((home / "pending_records").glob("*.failed"))
    with _instance(home) as instance:
        history = _check_results(instance, "no_regression")
        assert [entry.partition for entry in history] == [PARTITION, PARTITION]
        evaluations = {_latest(instance, "grades", PARTITION).tags[EVALUATION_TAG]}
        assert len(evaluations) == 1


def test_a_failed_stage_leaves_what_ran_before_it_and_its_message_names_it(
    tmp_path, server, monkeypatch
):
    root = _suite(tmp_path / "suite", server)

    async def broken(*args, **kwargs):
        raise RuntimeError("injected failure of the agent stage")

    monkeypatch.setattr(stages, "run_agents", broken)
    request = EvaluationRequest(models=(MODEL,), run_date=DAY)
    with pytest.raises(EvaluationFailed) as failed:
        run_evaluation(load_suite(root), request)
    assert str(failed.value) == (
        "evaluating openai:gpt-4.1 failed: RuntimeError: injected failure of the agent stage"
    )
    with _instance(instance_home(load_suite(root).config)) as instance:
        assert _latest(instance, "reference_results", DAY.isoformat()) is not None
        assert _latest(instance, "agent_runs", PARTITION) is None


def test_a_record_left_behind_after_it_was_written_is_not_written_twice(tmp_path, server):
    root = _suite(tmp_path / "suite", server)
    suite = load_suite(root)
    home = instance_home(suite.config)
    run_stages(suite, EvaluationRequest(models=(MODEL,), run_date=DAY), home)
    [record] = pending_records(home)
    kept = tmp_path / "record.json"
    shutil.copy(record, kept)
    assert record_pending(home) == 3
    # As if the recorder had stopped after its events, before removing the record.
    shutil.copy(kept, record)
    assert record_pending(home) == 0
    assert not pending_records(home)
    with _instance(home) as instance:
        assert (
            len(instance.fetch_materializations(dg.AssetKey("agent_runs"), limit=10).records) == 1
        )


def test_a_record_that_cannot_be_recorded_is_set_aside_and_the_next_is_recorded(
    tmp_path, server, monkeypatch
):
    home = tmp_path / "dagster_home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # one instance for two suites
    broken, kept = _suite(tmp_path / "broken", server), _suite(tmp_path / "kept", server)
    request = EvaluationRequest(models=(MODEL,), run_date=DAY)
    run_stages(load_suite(broken), request, instance_home(load_suite(broken).config))
    run_stages(load_suite(kept), request, instance_home(load_suite(kept).config))
    first, _second = pending_records(home)
    # Its definitions no longer load: a configuration edited into a mistake since.
    (broken / "eval_config.yaml").write_text("test: [not, a, mapping\n")

    assert record_pending(home) == 3  # the kept suite's runs
    assert not pending_records(home)
    assert first.with_suffix(".failed").exists()


def test_a_suites_first_warehouse_build_leaves_dagster_home_as_the_user_set_it(tmp_path):
    """The build named the instance in `$DAGSTER_HOME`, which the command then read as the
    user's choice of instance and waited for its record (~40 s on a suite's first run)."""
    suite = copy_sample_suite(tmp_path / "suite")
    config = load_config(suite)
    assert build_missing_warehouse(config, lambda _: None)
    assert "DAGSTER_HOME" not in os.environ

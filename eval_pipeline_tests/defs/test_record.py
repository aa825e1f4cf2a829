"""The Dagster record of a command's evaluation: `eval-pipeline test` does the work in its own
process and ends; a process of its own then records the same runs in the suite's instance,
without asking the model anything, and a record is never written twice."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs import EVALUATE_JOB, INPUTS_JOB, REPORT_JOB
from eval_pipeline.defs.evaluate import EvaluationFailed, EvaluationRequest, run_evaluation
from eval_pipeline.defs.launched import LAUNCHED_BY_TAG
from eval_pipeline.defs.record import RECORDED_TAG, record_pending
from eval_pipeline.pipeline import instance_home, pending_records, run_stages, stages
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.agents.tiny_suite import DAY, ROUTINE, write_suite
from eval_pipeline_tests.cli.console import run_cli_subprocess

pytestmark = pytest.mark.slow

MODEL = "openai:gpt-4.1"


@pytest.fixture(autouse=True)
def _dagster_home_restored(monkeypatch):
    """Recording sets `$DAGSTER_HOME` to the suite's instance, as a command's process does."""
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


def _runs(home: Path) -> list[dg.DagsterRun]:
    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        return list(reversed(instance.get_runs()))


def test_the_command_ends_and_its_runs_are_recorded_after_without_asking_the_model(
    tmp_path, server
):
    root = _suite(tmp_path / "suite", server)
    done = run_cli_subprocess("test", "-m", MODEL, "--date", DAY.isoformat(), cwd=root)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    asked = len(server.requests)
    assert asked == 4  # two tests, a query and an answer each
    home = instance_home(load_suite(root).config)
    record_pending(home)  # waits for the command's recorder, records what it left

    assert not pending_records(home)
    runs = _runs(home)
    assert [run.job_name for run in runs] == [INPUTS_JOB, EVALUATE_JOB, REPORT_JOB]
    assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
    assert all(run.tags[LAUNCHED_BY_TAG] == "cli" and RECORDED_TAG in run.tags for run in runs)
    assert runs[1].tags["dagster/partition"] == f"{DAY.isoformat()}|{MODEL}"
    assert len(server.requests) == asked, "recording the runs asked the model again"
    with dg.DagsterInstance.get() as instance:
        runs_event = instance.get_latest_materialization_event(dg.AssetKey("agent_runs"))
        assert runs_event is not None and runs_event.run_id == runs[1].run_id
        metadata = runs_event.asset_materialization.metadata
        assert metadata["executed"].value == 2 and metadata["reused"].value == 0
        # Dagster's own provenance: what the runs read, as a run in the instance records it.
        tags = runs_event.asset_materialization.tags
        assert tags["dagster/input_data_version/test_cases"] == load_suite(root).hash


def test_a_failed_stage_is_recorded_as_a_failed_run_the_message_names(
    tmp_path, server, monkeypatch
):
    root = _suite(tmp_path / "suite", server)

    async def broken(*args, **kwargs):
        raise RuntimeError("injected failure of the agent stage")

    monkeypatch.setattr(stages, "run_agents", broken)
    request = EvaluationRequest(models=(MODEL,), run_date=DAY)
    with pytest.raises(EvaluationFailed) as failed:
        run_evaluation(load_suite(root), request)
    message = str(failed.value)
    assert message.startswith("evaluating openai:gpt-4.1 failed: ")
    assert "injected failure of the agent stage" in message
    runs = _runs(instance_home(load_suite(root).config))
    assert [run.job_name for run in runs] == [INPUTS_JOB, EVALUATE_JOB]
    assert runs[0].status == dg.DagsterRunStatus.SUCCESS
    assert runs[1].status == dg.DagsterRunStatus.FAILURE
    assert f"Dagster run {runs[1].run_id}" in message


def test_a_record_left_behind_after_its_runs_is_not_recorded_twice(tmp_path, server):
    root = _suite(tmp_path / "suite", server)
    suite = load_suite(root)
    home = instance_home(suite.config)
    run_stages(suite, EvaluationRequest(models=(MODEL,), run_date=DAY), home)
    [record] = pending_records(home)
    kept = tmp_path / "record.json"
    shutil.copy(record, kept)
    assert record_pending(home) == 3
    # As if the recorder had stopped after its runs, before removing the record.
    shutil.copy(kept, record)
    assert record_pending(home) == 0
    assert len(_runs(home)) == 3 and not pending_records(home)


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

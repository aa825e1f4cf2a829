"""The usage assets in Dagster: the `usage_daily` job imports a day of generated traces, finds its friction and ranks the recommendations, with metadata a Dagster user reads; its schedule starts stopped; a suite without traces configured fails the run with what to set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs import build_definitions
from eval_pipeline.store import StateFolder, fetch
from eval_pipeline_tests.usage.production import write_month, write_project

pytestmark = pytest.mark.slow  # Dagster runs

# A month that ended a few weeks ago: within the partitions, which reach a year back.
FIRST_DAY = datetime.now(UTC).date() - timedelta(days=45)
DAY = (FIRST_DAY + timedelta(days=11)).isoformat()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "project")
    (root / "traces").mkdir()
    write_month(root / "traces" / "month.jsonl", 3_000, seed=5, first_day=FIRST_DAY)
    (root / "eval_config.yaml").write_text(
        "test:\n  models: [replay:demo]\nusage:\n  traces: [traces/*.jsonl]\n", encoding="utf-8"
    )
    return root


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [event] = [
        e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_day_of_traces_through_the_usage_job(project):
    defs = build_definitions(project)
    job = defs.resolve_job_def("usage_daily")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(partition_key=DAY, instance=instance)
        assert result.success
        conversations = metadata(result, "production_conversations")
        # Only the partition's day is read: about a thirtieth of the month.
        assert 50 < conversations["conversations"] < 200
        assert conversations["new"] == conversations["conversations"]
        assert conversations["records_left_out"] == 0
        signals = metadata(result, "usage_signals")
        assert signals["signals"] > 0 and signals["tool_error"] > 0
        ranked = metadata(result, "recommendations")
        assert ranked["recommendations"] > 0 and "| 1 |" in ranked["top"]
        assert metadata(result, "test_candidates")["candidates"] > 0
        # The same day again: nothing new, the same data version (nothing downstream moves).
        again = job.execute_in_process(partition_key=DAY, instance=instance)
        assert metadata(again, "production_conversations")["unchanged"] == conversations["new"]
        versions = [
            e.materialization.tags["dagster/data_version"]
            for r in (result, again)
            for e in r.get_asset_materialization_events()
            if e.asset_key == dg.AssetKey("production_conversations")
        ]
        assert versions[0] == versions[1]
    layout = StateFolder(project / ".eval")
    _, rows = fetch(layout, "SELECT count(*) FROM recommendations")
    assert rows[0][0] == ranked["recommendations"]
    _, days = fetch(layout, "SELECT DISTINCT run_date FROM usage_conversations")
    assert [str(d) for (d,) in days] == [DAY]


def test_the_schedule_starts_stopped_and_runs_the_day_before(project):
    defs = build_definitions(project)
    schedule = defs.resolve_schedule_def("daily_usage")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.job_name == "usage_daily"
    morning = datetime.combine(FIRST_DAY, datetime.min.time(), UTC) + timedelta(days=3, hours=7)
    context = dg.build_schedule_context(
        scheduled_execution_time=morning, repository_def=defs.get_repository_def()
    )
    [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == (FIRST_DAY + timedelta(days=2)).isoformat()


def test_without_traces_configured_the_run_fails_saying_what_to_set(tmp_path):
    root = write_project(tmp_path / "bare")
    defs = build_definitions(root)
    job = defs.resolve_job_def("usage_daily")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(partition_key=DAY, instance=instance, raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "usage.traces in eval_config.yaml" in failure.event_specific_data.error.message

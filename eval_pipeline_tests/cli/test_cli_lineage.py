"""Through the real CLI: what an evaluation leaves for Dagster's daemon and UI."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.defs import build_definitions
from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline.defs.partitions import model_day_key, today
from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import write_suite
from eval_pipeline_tests.pipeline.automation import evaluate_conditions, watch_tick

pytestmark = pytest.mark.slow

EARLY = "2026-01-05"


def first_day(suite: Path) -> str | None:
    """The first daily partition the code location shows for the suite."""
    graph = build_definitions(suite).resolve_asset_graph()
    return graph.get(dg.AssetKey("reference_results")).partitions_def.get_first_partition_key()


def requested(defs: dg.Definitions, result) -> set[tuple[str, str | None]]:
    return {
        (key.to_user_string(), partition)
        for key in defs.resolve_asset_graph().get_all_asset_keys()
        for partition in result.get_requested_partitions(key)
    }


def test_a_daemon_tick_after_a_cli_run_requests_nothing(tmp_path):
    suite = write_suite(tmp_path / "suite")
    home = suite / ".eval" / "dagster_home"  # the instance `eval-pipeline ui` shows
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(default_instance_yaml())
    defs = build_definitions(suite)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        before = evaluate_conditions(defs, instance)  # the daemon, running before the CLI
        assert requested(defs, before) == set()

        days = {today().isoformat()}
        result = run_cli("test", cwd=suite)
        days.add(today().isoformat())  # the command's today is one of these, also at midnight
        assert result.returncode == 0, result.stderr
        no_traceback(result)
        assert instance.get_materialized_partitions(dg.AssetKey("report")) in [{d} for d in days]

        after = evaluate_conditions(defs, instance, before.cursor)
        assert requested(defs, after) == set()  # the CLI ran the whole chain of its day
        # the CLI observed the files it read: nothing to observe, nothing to re-read
        tick = watch_tick(defs, instance)
        assert not tick.run_requests and not tick.asset_events
        assert instance.fetch_observations(dg.AssetKey("test_files"), limit=1).records


@pytest.fixture(scope="module")
def early(tmp_path_factory: pytest.TempPathFactory):
    """A suite evaluated once, on EARLY (before today, the first day of its history), by a
    model that misses the suite's min_accuracy: the suite, the first day its code location
    showed before that evaluation, the days it was today meanwhile (two across midnight) and
    the command's result. Shared by the two tests below."""
    suite = write_suite(tmp_path_factory.mktemp("early") / "suite")
    config = yaml.safe_load((suite / "eval_config.yaml").read_text())
    config["test"]["min_accuracy"] = 0.9
    (suite / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    days = {today().isoformat()}
    shown_before = first_day(suite)
    days.add(today().isoformat())
    result = run_cli("test", "--date", EARLY, "-m", "replay:mixed", "--format", "json", cwd=suite)
    no_traceback(result)
    return suite, shown_before, days, result


def test_partitions_start_where_the_history_starts_and_an_earlier_date_extends_them(early):
    suite, shown_before, days, result = early
    assert shown_before in days  # no history yet: no empty past days

    statuses = [r["status"] for r in json.loads(result.stdout)["results"]]
    assert statuses and "error" not in statuses, result.stderr  # the day was evaluated
    assert first_day(suite) == EARLY  # the first evaluation's day

    path = suite / "eval_config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    config["test"]["start_date"] = "2025-12-01"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert first_day(suite) == "2025-12-01"
    config["test"]["start_date"] = "2026-02-01"  # later than the history: its days stay
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert first_day(suite) == EARLY

    config["test"]["start_date"] = "first of may"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_cli("test", cwd=suite)
    path.write_text(original)
    assert result.returncode == 2
    assert "test.start_date: expected a day as YYYY-MM-DD, got 'first of may'" in result.stderr
    no_traceback(result)


def test_the_min_accuracy_check_reports_the_accuracy_the_cli_gates_on(early):
    suite, _, _, result = early
    assert result.returncode == 1, result.stderr  # one test fails: the gate is missed
    gate = json.loads(result.stdout)["threshold"]

    home = suite / ".eval" / "dagster_home"
    key = dg.AssetCheckKey(dg.AssetKey("model_summaries"), "min_accuracy")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        [record] = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [key]
        ).values()
    evaluation = record.event.dagster_event.event_specific_data
    assert evaluation.passed is gate["passed"] is False
    assert evaluation.metadata["accuracy"].value == f"{gate['accuracy']:.1%}"  # one definition
    assert evaluation.metadata["minimum"].value == "90.0%"
    assert evaluation.partition == str(model_day_key("replay:mixed", EARLY))
    assert evaluation.description.startswith(f"replay:mixed on {EARLY}: ")

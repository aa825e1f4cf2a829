"""The Dagster code location: it loads, validates, and has the shape the UI shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

import eval_pipeline
from eval_pipeline.defs import build_definitions

# Every test loads the definitions (dbt parses the sample project) or runs `dagster`.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def suite_copy(tmp_path_factory) -> Path:
    """The sample suite copied out of the repository, so dbt's parse output lands in tmp."""
    root = tmp_path_factory.mktemp("defs") / "suite"
    shutil.copytree(
        REPO / "tests_suite",
        root,
        ignore=shutil.ignore_patterns("target", "logs", ".eval", "*.duckdb"),
    )
    return root


@pytest.fixture(scope="module")
def defs(suite_copy) -> dg.Definitions:
    return build_definitions(suite_copy)


def test_dagster_validates_the_code_location_from_the_repo_root(suite_copy):
    env = dict(
        os.environ,
        EVAL_SUITE_DIR=str(suite_copy),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("dagster")),
            "definitions",
            "validate",
            "-w",
            "workspace.yaml",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Validation successful for code location eval_pipeline" in result.stdout + result.stderr


def test_asset_graph_has_every_stage_with_its_partitions(defs):
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    for name in (
        "test_cases",
        "agent_context",
        "reference_results",
        "agent_runs",
        "grades",
        "model_summaries",
        "leaderboard",
        "report",
        "warehouse/orders",
        "warehouse/customers",
    ):
        assert name in keys
    multi = graph.get(dg.AssetKey("agent_runs")).partitions_def
    assert isinstance(multi, dg.MultiPartitionsDefinition)
    assert {d.name for d in multi.partitions_defs} == {"model", "date"}
    assert isinstance(
        graph.get(dg.AssetKey("reference_results")).partitions_def, dg.DailyPartitionsDefinition
    )
    checks = {key.name for key in graph.asset_check_keys}
    assert {"min_accuracy", "no_regression"} <= checks
    assert "dbt" in graph.get(dg.AssetKey(["warehouse", "orders"])).kinds


def test_runs_and_references_depend_on_the_models_the_suite_sql_reads(defs):
    graph = defs.resolve_asset_graph()
    read = {
        "warehouse/customers",
        "warehouse/marketing_channels",
        "warehouse/order_items",
        "warehouse/orders",
        "warehouse/payments",
        "warehouse/products",
        "warehouse/refunds",
    }
    for asset in ("agent_runs", "reference_results", "warehouse_variants"):
        parents = {k.to_user_string() for k in graph.get(dg.AssetKey(asset)).parent_keys}
        assert {p for p in parents if p.startswith("warehouse/")} == read, asset
    # staging and raw models reach them through the marts, as the data flows
    orders = graph.get(dg.AssetKey(["warehouse", "orders"])).parent_keys
    assert dg.AssetKey(["warehouse", "staging", "stg_orders"]) in orders


def test_what_spends_money_starts_stopped_and_what_tidies_the_suite_runs(defs):
    schedule = defs.resolve_schedule_def("daily_evaluation")  # it calls the models under test
    assert schedule.cron_schedule == "0 6 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    names = (
        "sync_model_partitions",
        "watch_suite_files",
        "evaluation_automation",
        "tag_run_launcher",
    )
    for name in names:
        assert defs.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus.RUNNING
    for name in ("daily_history_marts", "compact_store"):
        assert defs.resolve_schedule_def(name).default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_evaluate_job_and_the_groups_name_what_the_ui_shows(defs):
    job = defs.resolve_job_def("evaluate_model_day")
    selected = {key.to_user_string() for key in job.asset_layer.selected_asset_keys}
    assert selected == {"agent_runs", "grades", "model_summaries"}
    graph = defs.resolve_asset_graph()
    group_of = {
        key.to_user_string(): graph.get(key).group_name for key in graph.materializable_asset_keys
    }
    assert group_of["test_cases"] == "suite"
    assert group_of["report"] == "evaluation"
    assert group_of["warehouse/orders"] == "warehouse"
    assert group_of["history/pass_rate_trend"] == "history"


def _package_files() -> dict[str, int]:
    package = Path(eval_pipeline.__file__).parent
    return {
        str(p.relative_to(package)): p.stat().st_mtime_ns
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_loading_the_definitions_never_writes_into_the_installed_package(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(
        REPO / "tests_suite",
        suite,
        ignore=shutil.ignore_patterns("target", "logs", ".eval", "*.duckdb"),
    )
    before = _package_files()
    build_definitions(suite)
    assert _package_files() == before
    # The packaged history project is parsed into the suite's state folder instead.
    assert (suite / ".eval" / "history_dbt" / "target" / "manifest.json").is_file()

"""The Dagster code location: it loads, validates (`dagster`, `dg`), and has the shape the UI shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import yaml

import eval_pipeline
from eval_pipeline.defs import SUITE_ENV, build_definitions, default_suite_root
from eval_pipeline.defs.assets.history import PROJECT_DIR
from eval_pipeline.defs.dbt_target import parse_target, user_cache_dir

# Every test loads the definitions (dbt parses the sample project) or runs `dagster`.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _package_files() -> dict[str, int]:
    package = Path(eval_pipeline.__file__).parent
    return {
        str(p.relative_to(package)): p.stat().st_mtime_ns
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@dataclass(frozen=True)
class FirstLoad:
    """The definitions as first loaded from a fresh copy of the sample suite (no dbt manifest
    yet: both dbt projects are parsed), with the installed package's files around the load."""

    suite: Path
    defs: dg.Definitions
    package_before: dict[str, int]
    package_after: dict[str, int]


@pytest.fixture(scope="module")
def first_load(tmp_path_factory) -> FirstLoad:
    """The sample suite copied out of the repository (so dbt's parse output lands in tmp) and
    its definitions loaded once for the module; the `dagster` and `dg` commands below load the
    same copy, its projects parsed by then."""
    suite = tmp_path_factory.mktemp("defs") / "suite"
    shutil.copytree(
        REPO / "tests_suite",
        suite,
        ignore=shutil.ignore_patterns("target", "logs", ".eval", "*.duckdb"),
    )
    before = _package_files()
    defs = build_definitions(suite)
    return FirstLoad(suite, defs, before, _package_files())


@pytest.fixture(scope="module")
def defs(first_load) -> dg.Definitions:
    return first_load.defs


def _from_the_repo_root(command: str, *args: str, suite: Path) -> subprocess.CompletedProcess:
    """A Dagster command (beside this Python) run from the repository, on `suite`."""
    env = dict(
        os.environ,
        EVAL_SUITE_DIR=str(suite),
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    return subprocess.run(
        [str(Path(sys.executable).with_name(command)), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_dagster_validates_the_code_location_from_the_repo_root(first_load):
    """`dagster definitions validate` on workspace.yaml: the validation `dg check defs` runs
    (on a workspace it writes from [tool.dg], which names the same location; CI runs it too)."""
    result = _from_the_repo_root(
        "dagster", "definitions", "validate", "-w", "workspace.yaml", suite=first_load.suite
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Validation successful for code location eval_pipeline" in result.stdout + result.stderr


def test_dg_and_workspace_yaml_name_one_code_location():
    """`dg check defs` / `dg dev` load [tool.dg.project]'s location, `dagster dev` and
    `dg dev -w workspace.yaml` workspace.yaml's: the same module under the same name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    (entry,) = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
    assert entry["python_module"] == {
        "module_name": project["code_location_target_module"],
        "location_name": project["code_location_name"],
    }


def test_from_the_repo_root_the_code_location_is_the_sample_suite(monkeypatch):
    """Without $EVAL_SUITE_DIR (as the commands above are given), `dg dev` or `dagster dev`
    started in the repository serves its sample suite."""
    monkeypatch.delenv(SUITE_ENV, raising=False)
    monkeypatch.chdir(REPO)
    assert default_suite_root() == REPO / "tests_suite"


def test_dg_lists_the_definitions(first_load):
    """`dg` accepts the project ([tool.dg] in pyproject.toml) and lists what it loads."""
    listed = _from_the_repo_root("dg", "list", "defs", "--json", suite=first_load.suite)
    assert listed.returncode == 0, listed.stderr[-3000:]
    defs = json.loads(listed.stdout)
    keys = {asset["asset_key"] for asset in defs["assets"]}
    assert {"test_cases", "agent_context", "grading_rules", "agent_runs", "grades"} <= keys
    assert {"daily_evaluation"} <= {schedule["name"] for schedule in defs["schedules"]}
    assert {"evaluate_model_day", "day_report"} <= {job["name"] for job in defs["jobs"]}


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


def test_loading_the_definitions_never_writes_into_the_installed_package(first_load):
    assert first_load.package_after == first_load.package_before
    # The packaged history project is parsed into the user's cache instead, not the suite.
    manifest = parse_target(PROJECT_DIR) / "manifest.json"
    assert manifest.is_file()
    assert manifest.is_relative_to(user_cache_dir())

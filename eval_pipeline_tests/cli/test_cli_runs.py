"""What one `eval-pipeline test` records in the suite's Dagster instance, read back from it.

Each stage is recorded as materializations tagged as launched by the CLI and grouped by
evaluation; the models' partitions are evaluated at the same time; an unchanged rerun records
nothing (and still reports and writes every result; see test_cli_unchanged_rerun.py,
where a run in error is retried by the next command), and never imports dagster_dbt when the
warehouse is already built.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.defs.dbt_keys import keys_cache
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, by_turn
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import (
    SCRIPT,
    cli_env,
    no_traceback,
    run_cli,
    stages_of,
    written_results,
)

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
MODELS = ("local:a", "local:b")
MODEL_FLAGS = tuple(arg for model in MODELS for arg in ("-m", model))
CASES = {f"q{i}": f"Question {i}: what is the revenue?" for i in range(3)}


@pytest.fixture(scope="module")
def server():
    # Each answer takes a moment, as a provider's does: runs of two models that overlap in
    # time overlap because they were started together, not by accident.
    with ScriptedServer("openai", script=by_turn(answer("540 USD.")), latency_s=0.5) as running:
        yield running


@pytest.fixture(scope="module")
def suite(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_suite(
        tmp_path_factory.mktemp("runs") / "suite",
        cases=CASES,
        dbt=False,
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
    )
    first = run_cli("test", "--date", DAY, *MODEL_FLAGS, cwd=root)
    no_traceback(first)
    assert first.returncode == 0, first.stdout + first.stderr
    return root


def test_every_stage_is_recorded_as_materializations_tagged_as_launched_by_the_cli(suite: Path):
    recorded = stages_of(suite)
    assert sorted(kind for kind, _ in recorded) == ["inputs", "model", "model", "report"]
    partitions = {partition for kind, partition in recorded if kind == "model"}
    assert partitions == {str(dg.MultiPartitionKey({"date": DAY, "model": m})) for m in MODELS}


def test_the_models_partitions_run_at_the_same_time(suite: Path, server: ScriptedServer):
    # Each model has a run per test in flight at once (threads 4): more requests than tests
    # were answered at the same moment only if both models' runs were.
    assert server.peak_in_flight > len(CASES), server.peak_in_flight


def test_an_unchanged_rerun_starts_no_run_and_an_edited_test_reruns_it(suite: Path):
    before = len(stages_of(suite))
    again = run_cli("test", "--date", DAY, *MODEL_FLAGS, cwd=suite)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"No agent run executed: all {len(CASES) * len(MODELS)} runs reused" in again.stdout
    assert (
        "nothing changed since the last evaluation of 2026-03-02: 6 stored run(s) reused, "
        "no Dagster run" in again.stdout
    )
    document = json.loads(written_results(again.stdout + again.stderr).read_text())
    assert len(document["results"]) == len(CASES) * len(MODELS)
    assert (document["executed_runs"], document["reused_runs"]) == (0, len(CASES) * len(MODELS))
    assert stages_of(suite)[before:] == []

    path = suite / "cases" / "q0.yml"
    case = yaml.safe_load(path.read_text())
    case["prompt"] = "Question 0: what is the total revenue?"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    edited = run_cli("test", "--date", DAY, *MODEL_FLAGS, "--format", "json", "-q", cwd=suite)
    assert edited.returncode == 0, edited.stderr
    document = json.loads(edited.stdout)
    assert (document["executed_runs"], document["reused_runs"]) == (2, 2 * (len(CASES) - 1))
    kinds = [kind for kind, _ in stages_of(suite)[before:]]
    assert sorted(kinds) == ["inputs", "model", "model", "report"]


# A dbt project over the tiny suite's warehouse: its docs (schema.yml), a profile and two
# models, enough for dbt to parse it; the warehouse file is already built.
DBT_PROFILE = """shop:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: "{{ var('warehouse_path', '../warehouse.duckdb') }}"
"""
DBT_MODELS = {"orders": "select * from main.orders", "customers": "select * from main.customers"}


def test_an_unchanged_rerun_of_a_dbt_suite_does_not_import_dagster_dbt(
    server: ScriptedServer, tmp_path: Path
):
    """A suite with a dbt project whose warehouse is built: the first command reads the dbt
    models (their keys are cached in the user's cache), the unchanged rerun imports no
    dagster_dbt. The claim does not depend on the project's size: two models do."""
    suite = write_suite(
        tmp_path / "suite",
        cases={"q0": CASES["q0"]},
        dbt=True,
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
    )
    (suite / "dbt" / "profiles.yml").write_text(DBT_PROFILE)
    for name, sql in DBT_MODELS.items():
        (suite / "dbt" / "models" / f"{name}.sql").write_text(sql + "\n")
    args = ("test", "--date", DAY, "-m", MODELS[0], "-q")
    first = run_cli(*args, cwd=suite)
    no_traceback(first)
    assert first.returncode == 0, first.stdout + first.stderr
    assert keys_cache(suite / "dbt").exists(), "the dbt models were not read"
    again = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *args],
        cwd=suite,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == first.returncode, again.stderr[-3000:]
    assert "No agent run executed" in again.stdout
    imported = [line for line in again.stderr.splitlines() if line.startswith("import time:")]
    assert imported, "python -X importtime printed nothing"
    assert not [line for line in imported if "dagster_dbt" in line]


def test_a_model_added_to_the_command_runs_alone_beside_one_whose_inputs_are_unchanged(
    server: ScriptedServer, tmp_path: Path
):
    root = write_suite(
        tmp_path / "suite",
        cases=CASES,
        dbt=False,
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
    )
    first = run_cli("test", "--date", DAY, "-m", MODELS[0], cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    before, asked = len(stages_of(root)), len(server.requests)

    both = run_cli("test", "--date", DAY, *MODEL_FLAGS, cwd=root)
    assert both.returncode == 0, both.stdout + both.stderr
    assert f"{MODELS[0]}: its inputs are unchanged, {len(CASES)} stored run(s) reused" in (
        both.stderr
    )
    assert len(server.requests) == asked + len(CASES)  # the added model's runs alone
    added = stages_of(root)[before:]
    assert [partition for kind, partition in added if kind == "model"] == [f"{DAY}|{MODELS[1]}"]

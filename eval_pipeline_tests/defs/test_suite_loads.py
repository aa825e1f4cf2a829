"""A Dagster run reads the suite's files once, not once per asset; the command line's runs grade the suite it loaded."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

import eval_pipeline.defs
from eval_pipeline.defs import INPUTS_JOB, build_definitions
from eval_pipeline.defs.evaluate import EvaluationFailed, EvaluationRequest, run_evaluation
from eval_pipeline.defs.instance import DAGSTER_HOME_ENV
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.conftest import copy_sample_suite
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    SmallSuite,
    agent_requests,
    open_small_suite,
)

pytestmark = pytest.mark.slow  # Dagster runs


@pytest.fixture
def small_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SmallSuite]:
    # An evaluation sets $DAGSTER_HOME for its process: back as it was after the test.
    monkeypatch.setenv(DAGSTER_HOME_ENV, str(tmp_path / "dagster_home"))
    with open_small_suite(tmp_path / "suite") as suite:
        yield suite


def _request() -> EvaluationRequest:
    return EvaluationRequest(models=MODELS, run_date=date.fromisoformat(DAY))


def test_a_command_line_evaluation_grades_the_suite_it_loaded(
    small_suite: SmallSuite, loads
) -> None:
    suite = load_suite(small_suite.root)
    result = run_evaluation(suite, _request())
    assert result.executed == len(suite.cases) * len(MODELS)
    assert loads == []  # every stage of both models read the suite it was handed


def test_the_definitions_of_a_suite_with_a_dbt_warehouse_read_the_suite_handed_in(
    tmp_path: Path, loads, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which dbt models the reference SQL reads is asked of the suite the command loaded.
    root = copy_sample_suite(tmp_path / "suite")
    suite = load_suite(root)
    assert suite.config.warehouse is not None and suite.config.warehouse.dbt_project is not None
    monkeypatch.setattr(eval_pipeline.defs, "warehouse_asset_keys", lambda warehouse: {})
    asked = []

    def models_read(read, *args):
        asked.append(read)
        return []

    monkeypatch.setattr(eval_pipeline.defs, "models_read", models_read)
    build_definitions(root, dbt=False, history=False, suite=suite)
    assert loads == [] and asked == [suite] and asked[0] is suite


@pytest.mark.parametrize("stage", ["reading the suite", f"evaluating {MODELS[0]}"])
def test_a_suite_edited_during_the_evaluation_fails_it(small_suite: SmallSuite, stage) -> None:
    suite = load_suite(small_suite.root)

    def edit_before(line: str) -> None:
        if line.startswith(stage):
            small_suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")

    with pytest.raises(EvaluationFailed) as failed:
        run_evaluation(suite, _request(), on_stage=edit_before)
    message = str(failed.value)
    assert message.startswith(stage), message
    assert f"the suite folder {small_suite.root.resolve()} changed during the evaluation" in message
    assert "run again" in message
    if stage == "reading the suite":
        assert agent_requests(small_suite.agent) == 0  # no model answered the mix


def test_a_run_launched_from_the_ui_reads_the_suite_once(small_suite: SmallSuite, loads) -> None:
    # The day's inputs: three assets read the suite (the tests, the references, the variants).
    defs = build_definitions(small_suite.root, dbt=False, history=False)
    with dg.DagsterInstance.ephemeral() as instance:
        job = defs.resolve_job_def(INPUTS_JOB)
        assert job.execute_in_process(instance=instance, partition_key=DAY).success
        assert len(loads) == 1
        small_suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")
        assert job.execute_in_process(instance=instance, partition_key=DAY).success
        assert len(loads) == 2  # the edited suite, once

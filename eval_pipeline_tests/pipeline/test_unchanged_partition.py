"""A model's partition is skipped only when its last runs, its grades and the request all say nothing changed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eval_pipeline.agents import answerer_identity
from eval_pipeline.pipeline import EvaluationRequest, partition_unchanged
from eval_pipeline.store import StateFolder, ensure_schema_files, write_rows
from eval_pipeline.suite import Suite, load_suite
from eval_pipeline_tests.agents.tiny_suite import DAY, write_suite

MODEL = "local:a"
CASES = {"q0": "What is the revenue?", "q1": "How many orders were shipped?"}


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    providers = [{"provider": "local", "base_url": "http://127.0.0.1:9/v1"}]
    return load_suite(write_suite(tmp_path / "suite", cases=CASES, dbt=False, providers=providers))


def _grade(suite: Suite, statuses: dict[str, str], checks: list[dict] | None = None) -> None:
    layout = StateFolder.of(suite.config)
    ensure_schema_files(layout)
    rows = [{"name": name, "status": status, "checks": checks} for name, status in statuses.items()]
    write_rows(layout, "grades", rows, model=MODEL, run_date=DAY, materialization_id="m1")


def _last_runs(suite: Suite, **changes: object) -> dict[str, object]:
    last = {"runs": 2, "errors": 0, "carried_over": 0}
    last["answerer"] = answerer_identity(suite.config, MODEL)
    return {**last, **changes}


def _unchanged(suite: Suite, request: EvaluationRequest | None = None, **last) -> bool:
    request = request or EvaluationRequest(models=(MODEL,), run_date=DAY)
    return partition_unchanged(request, suite.config, MODEL, 2, last_runs=_last_runs(suite, **last))


def test_a_partition_fully_run_and_graded_is_unchanged(suite: Suite) -> None:
    _grade(suite, {"q0": "passed", "q1": "failed"})
    assert _unchanged(suite)


@pytest.mark.parametrize(
    "last",
    [
        {"errors": 1},  # errors are retried
        {"carried_over": 1},  # a run of an earlier selection, not of this one
        {"runs": 1},  # a test added since
        {"answerer": "another endpoint"},  # the model answers otherwise now
    ],
)
def test_last_runs_that_differ_from_the_plan_run_again(suite: Suite, last) -> None:
    _grade(suite, {"q0": "passed", "q1": "failed"})
    assert not _unchanged(suite, **last)


def test_a_missing_or_errored_grade_runs_again(suite: Suite) -> None:
    _grade(suite, {"q0": "passed"})
    assert not _unchanged(suite)
    _grade(suite, {"q0": "passed", "q1": "error"})
    assert not _unchanged(suite)


def test_a_judge_non_answer_is_kept_and_a_judge_that_did_not_answer_is_asked_again(
    suite: Suite,
) -> None:
    no_verdict = {"kind": "evaluators", "status": "error", "message": "gave no verdict twice"}
    _grade(suite, {"q0": "error", "q1": "error"}, checks=[no_verdict])
    assert _unchanged(suite)
    _grade(suite, {"q0": "error", "q1": "error"}, checks=[{**no_verdict, "retry": True}])
    assert not _unchanged(suite)


def test_stale_or_never_materialized_runs_run_again(suite: Suite) -> None:
    _grade(suite, {"q0": "passed", "q1": "failed"})
    request = EvaluationRequest(models=(MODEL,), run_date=DAY)
    assert not partition_unchanged(request, suite.config, MODEL, 2, last_runs=None)


@pytest.mark.parametrize(
    "option",
    [{"no_cache": True}, {"recording": True}, {"rejudge": True}, {"rejudge_samples": 3}],
)
def test_an_option_asking_for_new_runs_or_verdicts_runs_again(suite: Suite, option) -> None:
    _grade(suite, {"q0": "passed", "q1": "failed"})
    request = replace(EvaluationRequest(models=(MODEL,), run_date=DAY), **option)
    assert not _unchanged(suite, request)

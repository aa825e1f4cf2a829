"""`evaluate`, the one entry point of an evaluation, in process with a runner standing in for
Dagster: it never reports a pass when nothing was graded, and refuses a day before running."""

from __future__ import annotations

from datetime import date

import pytest

from eval_pipeline.pipeline import EvaluationRequest, EvaluationResult, NothingGraded, evaluate
from eval_pipeline.suite import SuiteError, load_suite
from eval_pipeline_tests.agents.tiny_suite import write_suite


class Runner:
    """Runs nothing, as a broken machinery would, and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[EvaluationRequest] = []

    def __call__(self, suite, request, on_stage) -> EvaluationResult:
        self.asked.append(request)
        on_stage("running nothing")
        return EvaluationResult(executed=1)


def test_an_evaluation_that_graded_nothing_is_no_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # checked before anything runs
    suite = load_suite(write_suite(tmp_path / "suite", cases={"q0": "Revenue?"}, dbt=False))
    request = EvaluationRequest(models=("openai:gpt-a",), run_date=date(2026, 3, 2))
    runner, stages = Runner(), []
    with pytest.raises(NothingGraded, match="no graded run of this evaluation"):
        evaluate(suite, request, runner=runner, on_stage=stages.append)
    assert runner.asked == [request] and stages == ["running nothing"]
    assert not list(suite.config.results_dir.glob("*.json")), "a results file of nothing"


def test_a_day_that_cannot_hold_results_stops_before_anything_runs(tmp_path):
    suite = load_suite(write_suite(tmp_path / "suite", cases={"q0": "Revenue?"}, dbt=False))
    runner = Runner()
    request = EvaluationRequest(models=("openai:gpt-a",), run_date=date(1999, 12, 31))
    with pytest.raises(SuiteError, match="--date"):
        evaluate(suite, request, runner=runner)
    assert runner.asked == []

"""Editing a test, the agent's context or a grading rule marks runs or grades out of date in Dagster."""

from __future__ import annotations

import json

import pytest
from dagster._core.definitions.data_version import StaleStatus

from eval_pipeline.grading import PROMPTS_VERSION
from eval_pipeline.store import query
from eval_pipeline_tests.pipeline.automation import status
from eval_pipeline_tests.pipeline.small_suite import (
    EVALUATOR_CASE,
    MODELS,
    evaluate,
    materialize,
    prepare,
)

pytestmark = pytest.mark.slow  # each test starts Dagster runs


def test_editing_a_test_turns_the_runs_stale_until_they_are_rematerialized(small_suite, instance):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "agent_runs", MODELS[0]) == (StaleStatus.FRESH, [])

    materialize(defs, ["test_cases"], instance=instance)  # nothing changed: same data version
    assert status(defs, instance, "agent_runs", MODELS[0])[0] is StaleStatus.FRESH

    small_suite.edit_case(
        "total_revenue", prompt="What is the total revenue of all orders, in USD?"
    )
    materialize(defs, ["test_cases"], instance=instance)
    stale, causes = status(defs, instance, "agent_runs", MODELS[0])
    assert stale is StaleStatus.STALE
    assert causes == [("test_cases", "has a new data version")]
    assert status(defs, instance, "grades", MODELS[0])[0] is StaleStatus.STALE
    assert status(defs, instance, "agent_runs", MODELS[1])[0] is StaleStatus.MISSING

    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "agent_runs", MODELS[0]) == (StaleStatus.FRESH, [])
    assert status(defs, instance, "grades", MODELS[0])[0] is StaleStatus.FRESH


def test_editing_rules_md_turns_the_runs_stale(small_suite, instance):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "agent_runs", MODELS[0])[0] is StaleStatus.FRESH

    rules = small_suite.root / "RULES.md"
    rules.write_text(rules.read_text() + "Cancelled orders never count.\n")
    materialize(defs, ["agent_context"], instance=instance)
    stale, causes = status(defs, instance, "agent_runs", MODELS[0])
    assert stale is StaleStatus.STALE
    assert causes == [("agent_context", "has a new data version")]


def test_a_new_judge_turns_the_grades_stale_and_regrades_without_agent_calls(small_suite, instance):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "grades", MODELS[0]) == (StaleStatus.FRESH, [])
    first = query(small_suite.layout, "SELECT name, judge, checks FROM grades ORDER BY name")
    judged = first.set_index("name")
    assert judged.loc[EVALUATOR_CASE, "judge"] == f"judge:gpt-judge (prompts {PROMPTS_VERSION})"
    assert (
        json.loads(judged.loc[EVALUATOR_CASE, "checks"])[0]["judge"]
        == judged.loc[EVALUATOR_CASE, "judge"]
    )
    # last_query extraction asks no model: nothing judged the data cases
    assert judged.drop(EVALUATOR_CASE)["judge"].isna().all()

    materialize(defs, ["grading_rules"], instance=instance)  # the same judge: nothing changes
    assert status(defs, instance, "grades", MODELS[0])[0] is StaleStatus.FRESH

    small_suite.write_config(judge_model="judge:gpt-judge-2")
    materialize(defs, ["grading_rules"], instance=instance)
    stale, causes = status(defs, instance, "grades", MODELS[0])
    assert stale is StaleStatus.STALE
    assert causes == [("grading_rules", "has a new data version")]
    assert status(defs, instance, "agent_runs", MODELS[0])[0] is StaleStatus.FRESH

    agent_calls, judge_calls = len(small_suite.agent.requests), len(small_suite.judge.requests)
    evaluate(defs, instance, MODELS[0], assets=["grades"])
    assert len(small_suite.agent.requests) == agent_calls  # regraded from the stored runs
    assert len(small_suite.judge.requests) == judge_calls + 1
    assert small_suite.judge.last.json["model"] == "gpt-judge-2"
    assert status(defs, instance, "grades", MODELS[0]) == (StaleStatus.FRESH, [])
    regraded = query(small_suite.layout, "SELECT name, judge FROM grades WHERE judge IS NOT NULL")
    assert regraded.to_dict("records") == [
        {"name": EVALUATOR_CASE, "judge": f"judge:gpt-judge-2 (prompts {PROMPTS_VERSION})"}
    ]


def test_a_suite_tolerance_turns_the_grades_stale_naming_the_rule(small_suite, instance):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "grades", MODELS[0]) == (StaleStatus.FRESH, [])

    small_suite.write_config(comparison={"atol": 0.1})
    result = materialize(defs, ["grading_rules"], instance=instance)
    stale, causes = status(defs, instance, "grades", MODELS[0])
    assert stale is StaleStatus.STALE
    assert causes == [("grading_rules", "has a new data version")]
    assert status(defs, instance, "agent_runs", MODELS[0])[0] is StaleStatus.FRESH
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["changed_rules"].value == "tolerance"


def test_new_grading_code_turns_the_grades_stale(small_suite, instance, monkeypatch):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])
    assert status(defs, instance, "grades", MODELS[0]) == (StaleStatus.FRESH, [])

    # What a release or an edited checkout does: the grading code's version moves.
    import eval_pipeline.defs.assets.grades as grades_assets

    monkeypatch.setattr(grades_assets, "grading_code", lambda: "another-version")
    moved = small_suite.definitions()
    stale, causes = status(moved, instance, "grades", MODELS[0])
    assert stale is StaleStatus.STALE
    assert causes == [("grades", "has a new code version")]
    assert status(moved, instance, "agent_runs", MODELS[0])[0] is StaleStatus.FRESH

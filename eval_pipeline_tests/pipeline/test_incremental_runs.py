"""Re-materializing a partition calls the agent only for what changed."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.store import query
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    WRONG_SQL,
    SmallSuite,
    agent_requests,
    evaluate,
    materialize,
    metadata,
    prepare,
    run_counts,
)

pytestmark = pytest.mark.slow  # each test starts Dagster runs


def statuses(suite: SmallSuite, model: str) -> dict[str, str]:
    rows = query(
        suite.layout, "SELECT name, status FROM grades WHERE model = ? ORDER BY name", [model]
    )
    return dict(zip(rows["name"], rows["status"], strict=True))


def runs_config(**options: object) -> dict:
    return {"ops": {"agent_runs": {"config": options}}}


def test_a_second_materialization_reuses_every_run(small_suite, instance):
    defs = prepare(small_suite, instance)
    first = evaluate(defs, instance, MODELS[0])
    assert run_counts(first) == {"runs": 4, "executed": 4, "reused": 0, "carried_over": 0}
    assert metadata(first, "grades")["passed"] == 4
    requests = agent_requests(small_suite.agent)
    assert requests == 7  # three data cases (query, then answer) and one greeting

    second = evaluate(defs, instance, MODELS[0])
    assert run_counts(second) == {"runs": 4, "executed": 0, "reused": 4, "carried_over": 0}
    assert agent_requests(small_suite.agent) == requests
    assert len(small_suite.judge.requests) == 1  # the evaluator's verdict came from the cache
    assert query(small_suite.layout, "SELECT count(*) AS n FROM agent_runs").n[0] == 4
    assert query(small_suite.layout, "SELECT count(*) AS n FROM agent_runs_history").n[0] == 8


def test_editing_one_prompt_reruns_that_case_only_for_each_model(small_suite, instance):
    defs = prepare(small_suite, instance)
    for model in MODELS:
        evaluate(defs, instance, model)
    before = {model: agent_requests(small_suite.agent, model) for model in MODELS}

    small_suite.edit_case("customer_count", prompt="How many customers do we have in total?")
    materialize(defs, ["test_cases"], instance=instance)
    for model in MODELS:
        result = evaluate(defs, instance, model)
        assert run_counts(result) == {"runs": 4, "executed": 1, "reused": 3, "carried_over": 0}
        assert agent_requests(small_suite.agent, model) - before[model] == 2  # query + answer
    rerun = query(
        small_suite.layout, "SELECT DISTINCT name FROM agent_runs WHERE NOT reused ORDER BY name"
    )
    assert rerun.name.tolist() == ["customer_count"]


def test_a_new_tolerance_or_reference_regrades_without_calling_the_agent(small_suite, instance):
    small_suite.analyst.sql.update(
        total_revenue="SELECT SUM(amount) + 0.5 AS revenue FROM orders",  # half a dollar off
        customer_count=WRONG_SQL["customer_count"],  # says 0
    )
    defs = prepare(small_suite, instance)
    for model in MODELS:
        evaluate(defs, instance, model)
        assert statuses(small_suite, model)["total_revenue"] == "failed"
        assert statuses(small_suite, model)["customer_count"] == "failed"
    requests = agent_requests(small_suite.agent)

    small_suite.edit_case("total_revenue", comparison={"atol": 1.0})
    small_suite.edit_case("customer_count", sql="SELECT COUNT(*) - 3 AS customers FROM customers")
    materialize(defs, ["test_cases"], instance=instance)
    assert materialize(defs, ["reference_results"], partition_key=DAY, instance=instance).success
    for model in MODELS:
        evaluate(defs, instance, model, assets=["grades", "model_summaries"])
        assert statuses(small_suite, model) == dict.fromkeys(
            ["customer_count", "greets_the_team", "orders_by_region", "total_revenue"], "passed"
        )
    assert agent_requests(small_suite.agent) == requests


def test_a_selection_updates_its_cases_and_keeps_the_rest(small_suite, instance):
    defs = prepare(small_suite, instance)
    model = MODELS[0]
    evaluate(defs, instance, model)
    small_suite.analyst.sql["total_revenue"] = WRONG_SQL["total_revenue"]
    small_suite.edit_case("orders_by_region", prompt="How many orders per region, please?")
    materialize(defs, ["test_cases"], instance=instance)
    requests = agent_requests(small_suite.agent)

    # a fresh run of the selected case; the edited but unselected case keeps its old run
    result = evaluate(
        defs, instance, model, run_config=runs_config(select=["total_revenue"], no_cache=True)
    )
    assert run_counts(result) == {"runs": 4, "executed": 1, "reused": 0, "carried_over": 3}
    assert agent_requests(small_suite.agent) - requests == 2
    assert query(small_suite.layout, "SELECT count(*) AS n FROM agent_runs").n[0] == 4
    assert statuses(small_suite, model) == {
        "customer_count": "passed",
        "greets_the_team": "passed",
        "orders_by_region": "passed",
        "total_revenue": "failed",
    }

    everything = evaluate(defs, instance, model, run_config=runs_config(no_cache=True))
    assert run_counts(everything) == {"runs": 4, "executed": 4, "reused": 0, "carried_over": 0}
    assert agent_requests(small_suite.agent) - requests == 2 + 7


def test_a_selection_naming_no_test_fails_the_run(small_suite, instance):
    defs = prepare(small_suite, instance)
    result = materialize(
        defs,
        ["agent_runs"],
        partition_key=dg.MultiPartitionKey({"model": MODELS[0], "date": DAY}),
        instance=instance,
        run_config=runs_config(select=["no_such_test"]),
    )
    assert not result.success
    assert agent_requests(small_suite.agent) == 0

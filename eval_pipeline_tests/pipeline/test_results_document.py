"""The results document built from graded runs: nao's numbers where nao writes numbers, our
honest unknowns in our own keys, and nao's pass_metrics object."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.pipeline import build_results, ungraded_rows

NAO_FILE = Path(__file__).parent / "nao_results" / "results_20260105_143022.json"
DAY = date(2026, 1, 5)
MODEL = "vllm:qwen3"


def row(name: str, attempt: int, status: str, cost: float | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "model": MODEL,
        "attempt": attempt,
        "status": status,
        "passed": status == "passed",
        "message": "error" if status == "error" else status,
        "verified": True,
        "checks": [],
        "tokens": 100,
        "cost_usd": float("nan") if cost is None else cost,  # a query's missing cost
        "duration_ms": 1000.0,
        "tool_call_count": 0,
        "final_text": None,
        "run_tool_calls": [],
        "run_queries": [],
        "run_error": "Request failed: 502 Bad Gateway" if status == "error" else None,
        "reference_sql": "SELECT 1",
        "database": None,
    }


RUNS = [
    row("total_revenue", 0, "passed"),
    row("total_revenue", 1, "passed"),
    row("order_count", 0, "failed"),
    row("order_count", 1, "error"),
]


def test_pass_metrics_is_naos_object_with_the_same_numbers_as_naos_file():
    document = build_results(RUNS, [MODEL], ["total_revenue", "order_count"], DAY)
    nao = json.loads(NAO_FILE.read_text())
    expected = nao["pass_metrics"]
    for entry in expected["by_test"]:
        entry["model"] = MODEL  # nao's spelling is applied when the file is written
    assert document["pass_metrics"] == expected
    model = document["by_model"][0]
    assert {k: model[k] for k in ("k", "pass_at_1", "pass_at_k", "pass_hat_k")} == {
        k: nao["by_model"][0][k] for k in ("k", "pass_at_1", "pass_at_k", "pass_hat_k")
    }
    assert [m["passes"] for m in document["pass_metrics_by_test"]] == [2, 0]


def test_an_unknown_cost_is_0_in_naos_keys_and_unknown_in_ours():
    document = build_results(RUNS, [MODEL], ["total_revenue", "order_count"], DAY)
    assert {r["cost"] for r in document["results"]} == {0}
    assert {r["cost_usd"] for r in document["results"]} == {None}
    summary, model = document["summary"], document["by_model"][0]
    assert (summary["total_cost"], summary["total_cost_usd"], summary["cost_complete"]) == (
        0,
        None,
        False,
    )
    assert (model["total_cost"], model["total_cost_usd"], model["cost_complete"]) == (
        0,
        None,
        False,
    )
    errors = [r["error"] for r in document["results"]]
    assert errors == [None, None, None, "Request failed: 502 Bad Gateway"]


def test_a_partly_priced_model_keeps_the_known_sum_and_says_it_is_incomplete():
    runs = [row("total_revenue", 0, "passed", cost=0.25), row("order_count", 0, "failed")]
    document = build_results(runs, [MODEL], ["total_revenue", "order_count"], DAY)
    summary = document["summary"]
    assert (summary["total_cost"], summary["total_cost_usd"], summary["cost_complete"]) == (
        0.25,
        0.25,
        False,
    )


def test_a_planned_run_without_a_grade_is_an_error_run_never_left_out():
    planned = [
        (MODEL, name, attempt) for name in ("total_revenue", "order_count") for attempt in (0, 1)
    ]
    graded = RUNS[:3]  # the grade of order_count #1 went missing
    rows = graded + ungraded_rows(graded, planned, DAY)
    document = build_results(rows, [MODEL], ["total_revenue", "order_count"], DAY)

    assert document["summary"]["total"] == 4
    assert document["summary"]["errors"] == 1
    missing = document["results"][-1]
    assert (missing["name"], missing["attempt"], missing["status"]) == ("order_count", 1, "error")
    assert "no grade is stored" in missing["error"]
    assert ungraded_rows(RUNS, planned, DAY) == []

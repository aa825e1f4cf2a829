"""The results document built from graded runs: nao's numbers where nao writes numbers, our
honest unknowns in our own keys, and nao's pass_metrics object."""

from __future__ import annotations

import json
import pickle
from dataclasses import FrozenInstanceError
from datetime import date
from pathlib import Path

import pytest

from eval_pipeline.pipeline import Threshold, build_results, ungraded_rows, write_results_file
from eval_pipeline.pipeline._results import (  # the unit itself: the file's whole-document rendering
    readable_json,
)
from eval_pipeline.suite import forget_secrets, register_secret
from eval_pipeline_tests.pipeline.graded_rows import MODEL, row

NAO_FILE = Path(__file__).parent / "nao_results" / "results_20260105_143022.json"
DAY = date(2026, 1, 5)
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
    assert document.to_json()["pass_metrics"] == expected
    model = document.by_model[0]
    assert (model.k, model.pass_at_1, model.pass_at_k, model.pass_hat_k) == tuple(
        nao["by_model"][0][k] for k in ("k", "pass_at_1", "pass_at_k", "pass_hat_k")
    )
    assert [m.passes for m in document.pass_metrics_by_test] == [2, 0]


def test_an_unknown_cost_is_null_per_run_and_0_in_naos_totals_as_nao_writes_them():
    document = build_results(RUNS, [MODEL], ["total_revenue", "order_count"], DAY)
    assert {r.cost for r in document.results} == {None}
    assert {r.cost_usd for r in document.results} == {None}
    assert {r["cost"] for r in document.to_json()["results"]} == {None}
    summary, model = document.summary, document.by_model[0]
    assert (summary.total_cost, summary.total_cost_usd, summary.cost_complete) == (0, None, False)
    assert (model.total_cost, model.total_cost_usd, model.cost_complete) == (0, None, False)
    errors = [r.error for r in document.results]
    assert errors == [None, None, None, "Request failed: 502 Bad Gateway"]


def test_a_partly_priced_model_keeps_the_known_sum_and_says_it_is_incomplete():
    runs = [row("total_revenue", 0, "passed", cost=0.25), row("order_count", 0, "failed")]
    document = build_results(runs, [MODEL], ["total_revenue", "order_count"], DAY)
    summary = document.summary
    assert (summary.total_cost, summary.total_cost_usd, summary.cost_complete) == (
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

    assert document.summary.total == 4
    assert document.summary.errors == 1
    missing = document.results[-1]
    assert (missing.name, missing.attempt, missing.status) == ("order_count", 1, "error")
    assert "no grade is stored" in (missing.error or "")
    assert ungraded_rows(RUNS, planned, DAY) == []


# The results file's keys, in the order the file gives them (nao's first, then ours).
RESULT_KEYS = [
    *("name", "model", "passed", "status", "attempt", "run_key", "message", "verified"),
    *("tokens", "cost", "cost_usd", "duration_ms", "tool_call_count", "error", "run_date"),
]
DETAILS_KEYS = [
    *("response_text", "actual_data", "expected_data", "diff", "reference_sql"),
    *("verification_sql", "comparison", "tool_calls", "checks", "error"),
    *("reference_warnings", "semantic", "failure_kind", "tolerances", "nao_verdict"),
]
SUMMARY_KEYS = [
    *("total", "passed", "failed", "errors", "unverified", "pass_rate", "total_tokens"),
    *("total_cost", "total_cost_usd", "cost_complete", "total_duration_ms", "total_duration_s"),
    *("total_tool_calls", "avg_duration_ms", "avg_tool_calls"),
]
MODEL_KEYS = [
    *("model", "total", "passed", "failed", "errors", "pass_rate", "total_tokens", "total_cost"),
    *("total_cost_usd", "cost_complete", "total_duration_ms", "avg_duration_ms"),
    *("p50_duration_ms", "p95_duration_ms", "total_tool_calls", "avg_tool_calls"),
    *("k", "pass_at_1", "pass_at_k", "pass_hat_k", "pass_rate_ci95"),
]
PASS_KEYS = ["pass_at_1", "pass_at_k", "pass_hat_k"]
CASE_METRICS_KEYS = ["name", "model", "attempts", "passes", "errors", *PASS_KEYS, "flaky"]
COMPARISON_KEYS = [
    *("model_a", "model_b", "tests", "a_only", "b_only", "p_value", "p_adjusted", "significant"),
]
JUDGE_NOISE_KEYS = [
    *("name", "model", "attempts", "judged_runs", "samples", "judge_self_agreement"),
    *("agent_pass_at_1", "flips_on_judge"),
]


def test_the_json_has_exactly_the_results_files_keys_in_the_files_order():
    other = "openai:gpt-b"
    sampled = {**row("total_revenue", 0, "passed"), "judge_samples": [True, True, False]}
    runs = [sampled, *RUNS[1:], *({**r, "model": other} for r in RUNS)]
    document = build_results(runs, [MODEL, other], ["total_revenue", "order_count"], DAY)
    built = document.to_json()

    top = ["timestamp", "run_date", "results", "summary", "by_model", "pass_metrics"]
    assert list(built) == [*top, "pass_metrics_by_test", "judge_noise", "comparisons"]
    assert list(built["results"][0]) == [
        *RESULT_KEYS,
        "judge_samples",
        "judge_self_agreement",
        "details",
    ]
    assert all(list(r) == [*RESULT_KEYS, "details"] for r in built["results"][1:])
    assert all(list(r["details"]) == DETAILS_KEYS for r in built["results"])
    # nao counts attempts from 1 (the document, as the store, from 0).
    assert [r["attempt"] for r in built["results"][:4]] == [1, 2, 1, 2]
    assert [r.attempt for r in document.results[:4]] == [0, 1, 0, 1]
    assert list(built["summary"]) == SUMMARY_KEYS
    assert [list(m) for m in built["by_model"]] == [MODEL_KEYS, MODEL_KEYS]
    assert list(built["pass_metrics"]) == ["k", "aggregate", "by_test"]
    assert list(built["pass_metrics"]["aggregate"]) == PASS_KEYS
    assert {tuple(t) for t in built["pass_metrics"]["by_test"]} == {
        ("name", "model", "k", *PASS_KEYS)
    }
    assert {tuple(m) for m in built["pass_metrics_by_test"]} == {tuple(CASE_METRICS_KEYS)}
    assert [list(c) for c in built["comparisons"]] == [COMPARISON_KEYS]
    assert [list(n) for n in built["judge_noise"]] == [JUDGE_NOISE_KEYS]
    # JSON values only: the file is this, dumped.
    assert json.loads(json.dumps(built)) == built

    once = build_results(RUNS, [MODEL], ["total_revenue", "order_count"], DAY)
    evaluated = once.with_evaluation(
        executed_runs=3,
        reused_runs=1,
        threshold=Threshold(min_accuracy=0.5, mode="average", accuracy=0.5, passed=True),
    ).to_json()
    assert list(evaluated) == [
        *top,
        *("pass_metrics_by_test", "comparisons", "executed_runs", "reused_runs", "threshold"),
    ]
    # The keys readers of older files (nao's viewer among them) know come first, as they were.
    assert list(evaluated["threshold"]) == [
        *("min_accuracy", "mode", "accuracy", "passed", "errors", "allow_errors")
    ]
    assert evaluated["comparisons"] == [] and "executed_runs" not in once.to_json()


def test_the_labelled_document_spells_the_models_as_the_user_does_and_the_built_one_stays():
    document = build_results(RUNS, [MODEL], ["total_revenue", "order_count"], DAY)
    labelled = document.labelled(lambda model: f"openaiCompatible/{model}")
    spelled = f"openaiCompatible/{MODEL}"
    assert {r.model for r in labelled.results} == {spelled}
    assert [m.model for m in labelled.by_model] == [spelled]
    assert {m.model for m in labelled.pass_metrics_by_test} == {spelled}
    assert {t.model for t in labelled.pass_metrics.by_test} == {spelled}
    assert {r.model for r in document.results} == {MODEL}  # a new document, not an edit
    with pytest.raises(FrozenInstanceError):
        document.results[0].model = spelled  # type: ignore[misc]


def test_naos_comparison_is_the_diff_text_and_the_tolerances_are_ours():
    """nao's viewer shows `details.comparison` as text under "Diff": an object there blanks
    its page. A query result carries nao's `_version` stamp."""
    tolerances = {"rtol": 1e-05, "atol": 1e-08, "decimals": 2}
    diff = [
        {"_side": "actual", "_row": 0, "orders": 2},
        {"_side": "expected", "_row": 0, "orders": 3},
    ]
    failed = {
        **row("order_count", 0, "failed"),
        "checks": [{"kind": "data", "details": {"diff": diff, "comparison": tolerances}}],
        "run_tool_calls": [
            {"id": "call_1", "name": "execute_sql", "arguments": {}, "result": {"query_id": "q1"}}
        ],
        "run_queries": [{"id": "q1", "columns": ["orders"], "rows": [[2]], "row_count": 1}],
    }
    passed = {
        **row("total_revenue", 0, "passed"),
        "checks": [{"kind": "data", "details": {"diff": [], "comparison": tolerances}}],
    }
    document = build_results([passed, failed], [MODEL], ["total_revenue", "order_count"], DAY)
    matched, differed = (r["details"] for r in document.to_json()["results"])
    assert matched["comparison"] is None and matched["tolerances"] == tolerances
    assert differed["comparison"].splitlines() == [
        "side      row  orders",
        "actual    0    2",
        "expected  0    3",
    ]
    assert differed["tolerances"] == tolerances
    (call,) = differed["tool_calls"]
    assert call["result"]["_version"] == "1" and call["result"]["data"] == [{"orders": 2}]


NAO_DETAILS = {
    "nao": {
        "finish_reason": "stop",
        "verification": {
            "sql": "SELECT * FROM tool_call_1",
            "data": [{"orders": 2}],
            "expected_data": [{"orders": 2}, {"orders": 3}],
            "expected_columns": ["orders"],
            "error": None,
        },
        "verdict": {"passed": False, "message": "row count: 1 vs 2"},
    }
}


def test_naos_own_verdict_of_a_nao_agent_run_sits_in_details_and_is_null_for_others():
    nao_run = {**row("total_revenue", 0, "passed"), "answerer_details": NAO_DETAILS}
    other = row("order_count", 0, "passed")  # another agent: no such column value
    document = build_results([nao_run, other], [MODEL], ["total_revenue", "order_count"], DAY)
    first, second = (r["details"] for r in document.to_json()["results"])
    assert first["nao_verdict"] == {
        "passed": False,
        "message": "row count: 1 vs 2",
        "sql": "SELECT * FROM tool_call_1",
        "error": None,
    }
    assert second["nao_verdict"] is None


def _runs_with_data(count: int) -> list[dict]:
    """Runs whose data check holds a result and a diff, and a reply, as the store gives them."""
    runs = []
    for index in range(count):
        run = row(f"t{index:04d}", 0, "failed" if index % 3 else "passed")
        run["final_text"] = f"There are {index} orders, ünïcode included."
        run["checks"] = [
            {
                "kind": "data",
                "status": run["status"],
                "message": "the data differs" if index % 3 else "the data matched",
                "details": {
                    "actual_data": [{"n": index, "when": "2026-01-05"}],
                    "expected_data": [{"n": index + (1 if index % 3 else 0)}],
                    "diff": [
                        {"_side": "agent", "_row": 0, "n": index},
                        {"_side": "reference", "_row": 0, "n": index + 1},
                    ]
                    if index % 3
                    else None,
                },
            }
        ]
        runs.append(run)
    return runs


def test_the_results_file_written_a_result_at_a_time_is_the_documents_json(tmp_path):
    names = [f"t{index:04d}" for index in range(300)]
    document = build_results(_runs_with_data(300), [MODEL], names, DAY)

    path = write_results_file(document, tmp_path)

    text = path.read_text(encoding="utf-8")
    assert text == readable_json(document.to_json())
    written = json.loads(text)
    assert len(written["results"]) == 300
    assert written["results"][4]["details"]["diff"][1] == {"_side": "reference", "_row": 0, "n": 5}
    assert written["results"][4]["details"]["response_text"].endswith("ünïcode included.")


def test_a_result_read_back_from_its_spill_is_the_result_as_built():
    document = build_results(_runs_with_data(5), [MODEL], [f"t{i:04d}" for i in range(5)], DAY)
    failed = document.results[1]

    assert [side["n"] for side in failed.details.diff] == [1, 2]
    assert failed.details.actual_data == [{"n": 1, "when": "2026-01-05"}]
    assert failed.details.checks[0]["message"] == "the data differs"
    assert failed.details == pickle.loads(pickle.dumps(failed)).details
    assert document.labelled(str.upper).results[1].details == failed.details


def test_a_secret_in_a_reply_never_reaches_the_results_file(tmp_path):
    secret = "sk-live-0123456789abcdef"
    runs = _runs_with_data(3)
    runs[1]["final_text"] = f"my key is {secret}"
    document = build_results(runs, [MODEL], [f"t{i:04d}" for i in range(3)], DAY)
    register_secret(secret)
    try:
        text = write_results_file(document, tmp_path).read_text(encoding="utf-8")
    finally:
        forget_secrets()
    assert secret[8:] not in text
    assert json.loads(text)["results"][1]["details"]["response_text"].startswith("my key is ")

"""A store with realistic history for the viewer's tests: 2 models × 3 days × 6 tests.

What it holds, so tests can point at it:
* `top_customers` by claude on DAY3 failed: an ordered data diff where only Globex's revenue
  differs (310.0 actual, 300.0 expected); it passed on DAY2, so it regressed and is flaky.
* `total_revenue` by gpt on DAY2 failed: an unordered single-cell diff (1234.5 vs 1250.0).
* `polite_clarification` has an LLM evaluator `asks_for_period` with reasoning; claude fails it on DAY2.
* `markup_in_reply` by gpt replies with HOSTILE text on every day; claude errors on DAY3.
* `revenue_by_month` by claude on DAY1 has a second attempt that failed: flaky that day (its
  attempts disagree), unlike `total_revenue` by gpt (passed, failed, passed: day-to-day flips).
* `refund_rate` by claude fails from DAY2 on; its diff holds a DATE as grades written before
  an earlier version did (`2025-01-01T00:00:00.000Z`), its actual and expected data as written.
* `refund_rate` by gpt on DAY3 was reused: its run was made by an earlier invocation.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.agents import run_key
from eval_pipeline.pipeline import summarize_grades
from eval_pipeline.store import StateFolder, ensure_database, write_rows

GPT, CLAUDE = "openai:gpt-4.1", "anthropic:claude-sonnet-4-5"
MODELS = (GPT, CLAUDE)
DAY1, DAY2, DAY3 = date(2026, 6, 1), date(2026, 6, 2), date(2026, 6, 3)
DAYS = (DAY1, DAY2, DAY3)
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
CONTEXT = "ctx0001"

TOP_SQL = (
    "SELECT c.customer_name AS customer, ROUND(SUM(o.order_amount_usd), 2) AS revenue "
    "FROM orders o JOIN customers c USING (customer_id) WHERE o.status <> 'cancelled' "
    "GROUP BY 1 ORDER BY revenue DESC LIMIT 3"
)
REVENUE_SQL = (
    "SELECT ROUND(SUM(order_amount_usd - refunded_usd), 2) AS net_revenue_usd FROM orders "
    "WHERE status <> 'cancelled' AND NOT is_test_order"
)
CASES: list[dict[str, Any]] = [
    {
        "name": "total_revenue",
        "file": "cases/revenue/total_revenue.yml",
        "prompt": "What's our total revenue so far?",
        "sql": REVENUE_SQL,
        "kinds": ["data"],
        "tags": ["revenue"],
    },
    {
        "name": "revenue_by_month",
        "file": "cases/revenue/revenue_by_month.yml",
        "prompt": "Revenue per month in 2025?",
        "sql": "SELECT date_trunc('month', ordered_at) AS month, SUM(order_amount_usd) AS revenue FROM orders GROUP BY 1 ORDER BY 1",
        "kinds": ["data"],
        "tags": ["revenue"],
    },
    {
        "name": "top_customers",
        "file": "cases/customers/top_customers.yml",
        "prompt": "Who are our top 3 customers by revenue?",
        "sql": TOP_SQL,
        "kinds": ["data"],
        "tags": ["customers"],
    },
    {
        "name": "refund_rate",
        "file": "cases/customers/refund_rate.yml",
        "prompt": "What share of orders was refunded?",
        "sql": "SELECT AVG((refunded_usd > 0)::INT) AS refund_rate FROM orders",
        "kinds": ["data"],
        "tags": ["customers", "rates"],
    },
    {
        "name": "polite_clarification",
        "file": "cases/chat/polite_clarification.yml",
        "prompt": "How are sales doing?",
        "sql": None,
        "kinds": ["evaluators"],
        "tags": ["chat"],
    },
    {
        "name": "markup_in_reply",
        "file": "cases/chat/markup_in_reply.yml",
        "prompt": "Show me an HTML snippet",
        "sql": None,
        "kinds": ["evaluators"],
        "tags": ["chat", "security"],
    },
]
TOP_EXPECTED = [
    {"customer": "Acme Corp", "revenue": 500.0},
    {"customer": "Globex", "revenue": 300.0},
    {"customer": "Initech", "revenue": 200.0},
]


FLAKY = ("revenue_by_month", CLAUDE, DAY1)  # attempt 1 failed, attempt 0 passed
REUSED = ("refund_rate", GPT, DAY3)


def outcome(name: str, model: str, day: date, attempt: int = 0) -> str:
    if (name, model, day) == FLAKY and attempt == 1:
        return "failed"
    if name == "top_customers" and model == CLAUDE and day == DAY3:
        return "failed"
    if name == "total_revenue" and model == GPT and day == DAY2:
        return "failed"
    if name == "polite_clarification" and model == CLAUDE and day == DAY2:
        return "failed"
    if name == "refund_rate" and model == CLAUDE and day != DAY1:
        return "failed"
    if name == "markup_in_reply":
        return (
            "error" if model == CLAUDE and day == DAY3 else "failed" if model == GPT else "passed"
        )
    return "passed"


def _data_check(name: str, status: str) -> dict[str, Any]:
    case = next(c for c in CASES if c["name"] == name)
    details: dict[str, Any] = {
        "reference_sql": case["sql"],
        "extraction_source": "llm",
        "extraction_query": "SELECT * FROM q1",
    }
    if name == "top_customers":
        actual = [dict(r) for r in TOP_EXPECTED]
        diff: list[dict[str, Any]] = []
        message = "match"
        if status == "failed":
            actual[1]["revenue"] = 310.0
            diff = [
                {"_side": "actual", "_row": 1, "customer": "Globex", "revenue": 310.0},
                {"_side": "expected", "_row": 1, "customer": "Globex", "revenue": 300.0},
            ]
            message = "column 'revenue' differs at row 1: actual 310.0, expected 300.0; 1 of 3 rows differ"
        details.update(expected_data=TOP_EXPECTED, actual_data=actual, ordered=True, diff=diff)
    else:
        column, right, wrong = (
            ("refund_rate", 0.042, 0.047)
            if name == "refund_rate"
            else ("net_revenue_usd", 1250.0, 1234.5)
        )
        # refund_rate is per month: a DATE column, which older grades' diffs hold as pandas
        # wrote it after comparing it as a UTC timestamp
        month = {"month": "2025-01-01"} if name == "refund_rate" else {}
        stamped = {"month": "2025-01-01T00:00:00.000Z"} if name == "refund_rate" else {}
        expected = [{**month, column: right}]
        actual = [{**month, column: wrong if status == "failed" else right}]
        diff = (
            [
                {"_side": "actual only", "_row": 0, **stamped, column: wrong},
                {"_side": "expected only", "_row": 0, **stamped, column: right},
            ]
            if status == "failed"
            else []
        )
        message = (
            f"column {column!r} differs at row 0: actual {wrong}, expected {right}"
            if diff
            else "match"
        )
        details.update(expected_data=expected, actual_data=actual, ordered=False, diff=diff)
    return {"kind": "data", "status": status, "message": message, "details": details}


def _evaluator_check(name: str, status: str) -> dict[str, Any]:
    passed = status == "passed"
    reasoning = (
        "The reply asks which period the user means before answering."
        if passed
        else "The reply quotes raw HTML instead of asking what the user needs."
        if name == "markup_in_reply"
        else "The reply picks a period itself instead of asking which one is meant."
    )
    verdict = {
        "evaluator": "asks_for_period",
        "criteria": "Asks which period the user means",
        "passed": passed,
        "reasoning": reasoning,
        "error": None,
    }
    message = (
        "evaluators passed: asks_for_period"
        if passed
        else f"evaluator 'asks_for_period' failed: {reasoning}"
    )
    return {
        "kind": "evaluators",
        "status": status,
        "message": message,
        "details": {"evaluators": [verdict]},
    }


def _reply(name: str, model: str, status: str) -> str:
    if name == "markup_in_reply" and model == GPT:
        return HOSTILE
    if name == "polite_clarification":
        return (
            "Happy to help! Which period do you mean: this month, this quarter or this year?"
            if status == "passed"
            else "Sales are up 12% this month."
        )
    return f"Here is the answer to {name.replace('_', ' ')}: see the table above."


def _run_and_grade(
    case: dict[str, Any], model: str, day: date, index: int, attempt: int = 0
) -> tuple[dict, dict, list[dict]]:
    name, status = case["name"], outcome(case["name"], model, day, attempt)
    input_hash = f"in-{name}"
    key = run_key(name, input_hash, model, CONTEXT, attempt, day)
    seed = (index + 1) * (3 if model == GPT else 5) + day.day
    tokens_in, tokens_out = 1800 + 97 * seed, 140 + 11 * seed
    cost = (
        round((tokens_in * 2.0 + tokens_out * 8.0) / 1e6, 6)
        if model == GPT
        else round((tokens_in * 3.0 + tokens_out * 15.0) / 1e6, 6)
    )
    duration = 1400.0 + 173.0 * seed
    sql = case["sql"] or "SELECT 1"
    calls = (
        []
        if case["sql"] is None
        else [
            {
                "id": "call_1",
                "name": "execute_sql",
                "arguments": {"sql_query": sql.replace("\n", " "), "limit": 100},
                "raw_arguments": json.dumps({"sql_query": sql}),
                "error": None,
                "duration_ms": 42.0,
                "result": {
                    "query_id": "q1",
                    "columns": ["customer", "revenue"],
                    "row_count": 3,
                    "truncated": False,
                    "preview": "customer | revenue\nAcme Corp | 500.0\nGlobex | 310.0\nInitech | 200.0",
                },
            }
        ]
    )
    error = "provider returned 529 (overloaded) after 4 attempts" if status == "error" else None
    reply = "" if error else _reply(name, model, status)
    messages = [
        {"role": "system", "content": "You are a careful analytics agent. " * 20},
        {"role": "user", "content": case["prompt"]},
    ]
    if calls:
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "execute_sql",
                        "raw_arguments": calls[0]["raw_arguments"],
                        "arguments": calls[0]["arguments"],
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "content": calls[0]["result"]["preview"],
                "tool_call_id": "call_1",
                "name": "execute_sql",
            }
        )
    if reply:
        messages.append({"role": "assistant", "content": reply})
    run = {
        "key": key,
        "name": name,
        "model": model,
        "run_date": day,
        "attempt": attempt,
        "input_hash": input_hash,
        "context_hash": CONTEXT,
        "status": "error" if error else "completed",
        "final_text": reply,
        "messages": messages,
        "tool_calls": calls,
        "queries": [],
        "answer": None,
        "input_tokens": tokens_in,
        "cached_input_tokens": 512,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "cost_usd": cost,
        "duration_ms": duration,
        "turns": 2,
        "tool_call_count": len(calls),
        "error": error,
        "started_at": f"{day}T06:00:00+00:00",
        "finished_at": f"{day}T06:00:09+00:00",
        "reused": (name, model, day) == REUSED,
    }
    if error:
        checks, message = [], error
    elif case["sql"] is not None:
        check = _data_check(name, status)
        checks, message = [check], check["message"]
    else:
        check = _evaluator_check(name, status)
        checks, message = [check], check["message"]
    grade = {
        "name": name,
        "model": model,
        "run_date": day,
        "attempt": attempt,
        "run_key": key,
        "content_hash": f"c-{name}",
        "status": status,
        "passed": status == "passed",
        "message": message,
        "verified": True,
        "checks": checks,
        "tokens": tokens_in + tokens_out,
        "cost_usd": cost,
        "duration_ms": duration,
        "tool_call_count": len(calls),
    }
    tool_rows = [
        {
            "run_key": key,
            "name": name,
            "model": model,
            "run_date": day,
            "attempt": attempt,
            "call_index": i,
            "tool": c["name"],
            "arguments": c["arguments"],
            "result": c["result"],
            "error": c["error"],
            "duration_ms": c["duration_ms"],
        }
        for i, c in enumerate(calls)
    ]
    return run, grade, tool_rows


def build_store(root: Path) -> StateFolder:
    """Write the history under `root` (a suite's `.eval` folder) and return its layout."""
    layout = StateFolder(root)
    ensure_database(layout)
    write_rows(
        layout,
        "test_cases",
        [
            {
                **{k: v for k, v in c.items()},
                "messages": [{"role": "user", "content": c["prompt"]}],
                "input_hash": f"in-{c['name']}",
                "content_hash": f"c-{c['name']}",
                "suite_hash": "s1",
                "category": c["tags"][0],
                "difficulty": "easy",
                "notes": None,
            }
            for c in CASES
        ],
    )
    for day in DAYS:
        for model in MODELS:
            runs, grades, tools = [], [], []
            for index, case in enumerate(CASES):
                attempts = 2 if (case["name"], model, day) == FLAKY else 1
                for attempt in range(attempts):
                    run, grade, tool_rows = _run_and_grade(case, model, day, index, attempt)
                    runs.append(run)
                    grades.append(grade)
                    tools.extend(tool_rows)
            write_rows(layout, "agent_runs", runs, model=model, run_date=day)
            write_rows(layout, "tool_calls", tools, model=model, run_date=day)
            write_rows(layout, "grades", grades, model=model, run_date=day)
            summary = {**summarize_grades(grades).to_row("s1"), "run_date": day}
            write_rows(
                layout,
                "model_summaries",
                [summary],
                model=model,
                run_date=day,
            )
    return layout

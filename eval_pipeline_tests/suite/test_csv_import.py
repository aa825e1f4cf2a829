"""Calibrate CSV bulk import: rows become YAML test files, all or nothing."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from eval_pipeline.suite import SuiteError, import_csv, load_suite


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


TOOL_CALLS = '[{"tool": "execute_sql", "arguments": {"sql_query": {"match_type": "llm_judge", "criteria": "counts orders"}}}]'


def test_tool_call_and_reply_rows_become_loadable_cases(make_suite, tmp_path):
    root = make_suite({"existing.yml": "prompt: hi\n"})
    tools = write_csv(
        tmp_path / "tools.csv",
        ["name", "conversation_history", "tool_calls"],
        [["Counts orders", '[{"role": "user", "content": "How many orders?"}]', TOOL_CALLS]],
    )
    replies = write_csv(
        tmp_path / "replies.csv",
        [
            "name",
            "conversation_history",
            "Correctness",
            "Correctness/criteria",
            "Tone",
            "Tone/criteria",
        ],
        [
            [
                "greets then answers",
                '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "revenue?"}]',
                "",
                "Gives a revenue figure",
                "false",
                "",
            ]
        ],
    )
    written = import_csv(tools, root) + import_csv(replies, root, into="imported")
    assert [p.relative_to(root).as_posix() for p in written] == [
        "cases/counts_orders.yaml",
        "cases/imported/greets_then_answers.yaml",
    ]
    cases = {c.name: c for c in load_suite(root).cases}
    assert cases["Counts orders"].tool_calls[0].arguments["sql_query"].criteria == "counts orders"
    reply = cases["greets then answers"]
    assert [m.role for m in reply.messages] == ["user", "assistant", "user"]
    assert [(e.name, e.criteria) for e in reply.evaluators] == [
        ("Correctness", "Gives a revenue figure")
    ]


def test_broken_json_cell_names_row_and_column_and_writes_nothing(make_suite, tmp_path):
    root = make_suite({})
    path = write_csv(
        tmp_path / "t.csv",
        ["name", "conversation_history", "tool_calls"],
        [
            ["good", '[{"role": "user", "content": "hi"}]', TOOL_CALLS],
            ["bad", '[{"role": "user", "content": "hi"', TOOL_CALLS],
        ],
    )
    with pytest.raises(SuiteError) as error:
        import_csv(path, root)
    (problem,) = error.value.problems
    assert str(problem).startswith("t.csv:row 3: conversation_history: is not valid JSON")
    assert "no test file was written" in str(error.value)
    assert list((root / "cases").iterdir()) == []


def test_duplicates_in_file_and_in_suite_are_refused(make_suite, tmp_path):
    root = make_suite({"orders.yml": "name: orders\nprompt: hi\n"})
    row = '[{"role": "user", "content": "hi"}]'
    path = write_csv(
        tmp_path / "t.csv",
        ["name", "conversation_history", "tool_calls"],
        [["orders", row, TOOL_CALLS], ["twice", row, TOOL_CALLS], ["twice", row, TOOL_CALLS]],
    )
    with pytest.raises(SuiteError) as error:
        import_csv(path, root)
    messages = [str(p) for p in error.value.problems]
    assert messages[0] == "t.csv:row 2: name: test 'orders' already exists (cases/orders.yml)"
    assert messages[1].startswith("t.csv:row 4: name: test 'twice' already exists (t.csv:row 3)")
    assert sorted(p.name for p in (root / "cases").iterdir()) == ["orders.yml"]


def test_invalid_case_in_a_row_is_reported_with_the_row(make_suite, tmp_path):
    root = make_suite({})
    path = write_csv(
        tmp_path / "t.csv",
        ["name", "conversation_history", "tool_calls"],
        [
            [
                "x",
                '[{"role": "assistant", "content": "hi"}]',
                '[{"tool": "t", "arguments": {"a": {"match_type": "nope"}}}]',
            ]
        ],
    )
    with pytest.raises(SuiteError) as error:
        import_csv(path, root)
    messages = [str(p) for p in error.value.problems]
    assert any(
        m.startswith("t.csv:row 2: conversation[0]: the conversation must end with a user message")
        for m in messages
    )
    assert any(
        m.startswith("t.csv:row 2: tool_calls[0].arguments.a.match_type: unknown matcher")
        for m in messages
    )

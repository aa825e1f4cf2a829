"""`eval-pipeline usage import`: OTLP/JSON as a collector writes it and the documented JSONL, idempotent, bad records named with the rest kept, personal data never stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline.usage import stored_conversations
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.usage.production import write_month, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path / "project")


def conversations(project: Path):
    return {c.id: c for c in stored_conversations(StateFolder(project / ".eval"))}


def store_bytes(project: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (project / ".eval").rglob("*.parquet"))


JSONL = [
    {
        "conversation_id": "c1",
        "user": "ana@example.com",
        "model": "gpt-4.1",
        "started_at": "2026-10-03T09:00:00Z",
        "messages": [
            {"role": "user", "content": "Net revenue in October? Mail me at ana@example.com"},
            {
                "role": "assistant",
                "content": "129,400",
                "tool_calls": [
                    {"name": "execute_sql", "arguments": {"sql": "SELECT sum(amount) FROM orders"}}
                ],
                "feedback": "down",
                "feedback_comment": "call me on +44 20 7946 0958",
            },
        ],
    },
    {
        "conversation_id": "c2",
        "user": "bo",
        "started_at": "2026-10-04T10:00:00Z",
        "messages": [
            {"role": "user", "content": "Orders per status?"},
            {"role": "assistant", "content": "12"},
        ],
    },
]


def write_jsonl(path: Path, documents, *extra_lines: str) -> Path:
    lines = [json.dumps(d) for d in documents] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_is_imported_once_and_a_changed_conversation_replaces_its_reading(project):
    source = write_jsonl(project / "chats.jsonl", JSONL)
    first = run_cli("usage", "import", str(source), cwd=project)
    assert first.returncode == 0, first.stderr
    assert "2 conversation(s) read: 2 new, 0 updated, 0 unchanged over 2 day(s)" in first.stdout
    again = run_cli("usage", "import", str(source), cwd=project)
    assert "2 new" not in again.stdout and "0 new, 0 updated, 2 unchanged" in again.stdout
    assert len(conversations(project)) == 2
    edited = [
        JSONL[0],
        {**JSONL[1], "messages": [*JSONL[1]["messages"], {"role": "user", "content": "thanks"}]},
    ]
    changed = run_cli("usage", "import", str(write_jsonl(source, edited)), cwd=project)
    assert "0 new, 1 updated, 1 unchanged" in changed.stdout
    assert len(conversations(project)["c2"].turns) == 3


def test_bad_lines_are_named_exit_2_and_the_good_ones_are_stored(project):
    no_id = {**JSONL[1], "conversation_id": ""}
    bad_role = {
        **JSONL[1],
        "conversation_id": "c9",
        "messages": [{"role": "robot", "content": "x"}],
    }
    source = write_jsonl(
        project / "chats.jsonl",
        [JSONL[0], no_id, bad_role, JSONL[1]],
        '{"conversation_id": "c5", "mess',
    )
    done = run_cli("usage", "import", str(source), cwd=project)
    assert done.returncode == 2
    assert f"{source}:2: conversation_id: missing" in done.stderr
    assert f"{source}:3: messages[0].role: expected user or assistant, got 'robot'" in done.stderr
    assert f"{source}:5: not JSON" in done.stderr  # a truncated last line
    assert "3 record(s) could not be read and were left out; the others are stored" in done.stderr
    assert set(conversations(project)) == {"c1", "c2"}


def test_no_person_is_stored_only_a_pseudonym_and_masked_text(project):
    source = write_jsonl(project / "chats.jsonl", JSONL)
    run_cli("usage", "import", str(source), cwd=project)
    stored = store_bytes(project)
    for personal in (b"ana@example.com", b"7946 0958", b'"bo"'):
        assert personal not in stored
    c1 = conversations(project)["c1"]
    assert c1.turns[0].text == "Net revenue in October? Mail me at <email>"
    assert c1.turns[1].feedback_comment == "call me on <phone>"
    assert c1.user and c1.user.startswith("u_") and c1.user != conversations(project)["c2"].user
    # The same person has the same pseudonym in the next import; the key stays out of the store.
    key = (project / ".eval" / "usage" / "pseudonym.key").read_bytes()
    assert key not in stored
    write_jsonl(source, [{**JSONL[1], "conversation_id": "c3", "user": "ana@example.com"}])
    run_cli("usage", "import", str(source), cwd=project)
    assert conversations(project)["c3"].user == c1.user


def test_otlp_json_from_a_collector_becomes_conversations_with_tools_votes_and_no_email(project):
    traces = write_month(project / "traces.jsonl", 800, seed=3)
    done = run_cli("usage", "import", str(traces), cwd=project)
    assert done.returncode == 0, done.stderr
    stored = conversations(project)
    assert len(stored) == 800
    assert b"@example.com" not in store_bytes(project) and b"user001" not in store_bytes(project)
    voted = [t for c in stored.values() for t in c.turns if t.feedback == "down"]
    failed = [call for c in stored.values() for t in c.turns for call in t.tool_calls if call.error]
    assert len(voted) >= 55 and len(failed) >= 70 + 45
    corrected = next(
        c
        for c in stored.values()
        if any("refunds" in t.text for t in c.turns if t.role == "user")
        and len([t for t in c.turns if t.role == "user"]) == 2
    )
    assert [t.role for t in corrected.turns] == ["user", "assistant", "user", "assistant"]
    assert corrected.turns[1].tool_calls[0].sql.startswith("SELECT sum(o.amount)")


def test_a_malformed_span_a_span_without_conversation_and_a_cut_line_are_named(project):
    good = next(
        iter(
            json.loads(line)
            for line in write_month(project / "t.jsonl", 5, seed=1).read_text().splitlines()
        )
    )
    spans = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0] = {**spans[0], "startTimeUnixNano": "yesterday"}
    spans[1]["attributes"] = [
        a for a in spans[1]["attributes"] if a["key"] != "gen_ai.conversation.id"
    ]
    path = project / "broken.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(good)[:500] + "\n", encoding="utf-8")
    done = run_cli("usage", "import", str(path), "--source", "otel", cwd=project)
    assert done.returncode == 2
    assert f"{path}:1: spans[0]: invalid literal for int()" in done.stderr
    assert f"{path}:1: spans[1].attributes.gen_ai.conversation.id: missing on a" in done.stderr
    assert f"{path}:2: not JSON" in done.stderr
    assert len(conversations(project)) >= 1  # what could be read is stored


def test_a_file_that_does_not_exist_is_named_and_nothing_is_imported(project):
    done = run_cli("usage", "import", "nowhere.jsonl", cwd=project)
    assert done.returncode == 2
    assert "nowhere.jsonl: no such file" in done.stderr
    assert not (project / ".eval" / "store").exists() or not conversations(project)


def test_an_agents_protocol_exchanges_are_gathered_into_its_conversations(project):
    """An agent that speaks our agent protocol logs one line per exchange: the request it got
    and the reply it gave. The exchanges of one conversation become one conversation, each
    reply an answer with its tool calls, its failed queries as failed calls, and its vote."""
    first = {
        "conversation_id": "a1",
        "user": "ana@example.com",
        "at": "2026-10-01T10:00:00Z",
        "request": {
            "test": "live",
            "messages": [{"role": "user", "content": "Revenue in October?"}],
        },
        "reply": {
            "text": "It was 10.",
            "tool_calls": [
                {"name": "execute_sql", "arguments": {"sql_query": "SELECT 1 FROM orders"}}
            ],
            "queries": [{"id": "q1", "sql": "SELECT x FROM refunds", "error": "no column x"}],
        },
        "feedback": "down",
    }
    second = {
        "conversation_id": "a1",
        "at": "2026-10-01T10:01:00Z",
        "request": {
            "messages": [
                {"role": "user", "content": "Revenue in October?"},
                {"role": "assistant", "content": "It was 10."},
                {"role": "user", "content": "That's wrong, refunds count."},
            ]
        },
        "reply": {"text": "It was 8."},
    }
    broken = {"conversation_id": "a2", "at": "2026-10-01T11:00:00Z", "request": {}, "reply": {}}
    source = write_jsonl(project / "agent.jsonl", [second, broken, first])  # any order
    done = run_cli("usage", "import", str(source), cwd=project)
    assert done.returncode == 2
    assert f"{source}:2: request.messages: expected the request's list of messages" in done.stderr
    [conversation] = conversations(project).values()
    assert [(t.role, t.text) for t in conversation.turns] == [
        ("user", "Revenue in October?"),
        ("assistant", "It was 10."),
        ("user", "That's wrong, refunds count."),
        ("assistant", "It was 8."),
    ]
    reply = conversation.turns[1]
    assert reply.feedback == "down"
    assert [(c.sql, c.error) for c in reply.tool_calls] == [
        ("SELECT 1 FROM orders", None),
        ("SELECT x FROM refunds", "no column x"),
    ]

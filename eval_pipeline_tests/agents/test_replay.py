"""Record and replay: a recorded run plays back offline as the same run, concurrent runs never
mix their turns, a line answers only the request it was recorded for, and a recording that
lacks a turn or is malformed says exactly where."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from eval_pipeline.agents import (
    AgentRun,
    ChatMessage,
    Recording,
    RekeyReport,
    ReplayChatModel,
    ReplayMissing,
    RunStatus,
    ToolSpec,
    UnknownModel,
    call_context,
    execute_runs,
    request_hash,
)
from eval_pipeline.pipeline._rekey import (  # the unit itself: a maintainer's tool, no command
    rekey_recordings,
)
from eval_pipeline.suite import Suite, load_suite
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    Tokens,
    answer,
    call,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import (
    DAY,
    QUESTIONS,
    by_prompt,
    make_suite,
    open_factory,
    requests_for,
    write_case,
    write_recording,
)


def run_all(
    suite: Suite, model: str, *, recording: bool = False, k: int = 1, concurrency: int = 6
) -> list[AgentRun]:
    """Every case (k attempts each) by `model`, all at once, as a materialization makes them."""

    async def go() -> list[AgentRun]:
        async with open_factory(suite, recording=recording) as factory:
            requests = requests_for(suite, model, k=k, context=factory.context)
            return await execute_runs(requests, factory.agent, concurrency=concurrency)

    return asyncio.run(go())


def rekey(suite: Suite, name: str = "demo", k: int | None = None) -> RekeyReport:
    """Fill in the request keys of a hand-written recording, as benchmarks/rekey_recording.py does."""
    (report,) = asyncio.run(rekey_recordings(suite, [f"replay:{name}"], run_date=DAY, k=k))
    return report


def observable(run: AgentRun) -> dict[str, Any]:
    """What a person or a grader sees of a run (the model id and timing aside)."""
    return {
        "status": run.status,
        "final_text": run.final_text,
        "messages": run.messages,
        "tool_calls": [(c.name, c.arguments, c.result, c.error) for c in run.tool_calls],
        "queries": [(q.sql, q.columns, q.rows, q.error) for q in run.queries],
        "usage": run.usage,
        "turns": run.turns,
    }


# ---- round trip ---------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_recorded_run_replays_offline_as_the_same_run(tmp_path, protocol):
    with ScriptedServer(protocol) as server:
        suite = make_suite(tmp_path, server, cases={"revenue": "What is our revenue?"})
        tokens = Tokens(input=900, output=30, cached=600)
        server.script(
            tool_calls(call("list_tables"), tokens=tokens),
            tool_calls(execute_sql("SELECT sum(amount_usd) AS revenue FROM orders"), tokens=tokens),
            answer("Revenue is 780 USD.", tokens=tokens),
        )
        (recorded,) = run_all(suite, f"{protocol}:gpt-4.1", recording=True)
    # The server is gone: whatever follows is served from the file.

    path = suite.root / "recordings" / f"{protocol}-gpt-4.1.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["test"], e["attempt"], e["purpose"], e["turn"]) for e in lines] == [
        ("revenue", 0, "agent", 0),
        ("revenue", 0, "agent", 1),
        ("revenue", 0, "agent", 2),
    ]
    assert all(e["model"] == f"{protocol}:gpt-4.1" and e["raw"] for e in lines)

    (replayed,) = run_all(suite, f"replay:{protocol}-gpt-4.1")

    assert recorded.status is RunStatus.COMPLETED
    assert replayed.model == f"replay:{protocol}-gpt-4.1"
    assert observable(replayed) == observable(recorded)
    assert replayed.queries[0].rows == [[780.0]]  # the SQL really ran again, on the warehouse
    assert replayed.usage.cached_input_tokens == 1800
    assert replayed.cost_usd is None  # a replay costs nothing and knows no prices


def test_a_recorded_cut_reply_replays_as_the_same_error(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, cases={"revenue": "What is our revenue?"})
    openai_server.script(
        tool_calls(execute_sql("SELECT sum(amount_usd) AS revenue FROM orders")),
        answer("Revenue is 7", cut=True),
    )
    (recorded,) = run_all(suite, "openai:gpt-4.1", recording=True)
    (replayed,) = run_all(suite, "replay:openai-gpt-4.1")

    assert recorded.status is replayed.status is RunStatus.ERROR
    assert "its reply was cut" in recorded.error and "its reply was cut" in replayed.error
    assert "no turn" not in replayed.error  # the cut turn is in the recording
    assert replayed.messages[-1]["content"] == recorded.messages[-1]["content"] == "Revenue is 7"


def test_concurrent_runs_of_different_tests_replay_their_own_turns(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, cases=QUESTIONS)
    scripts = {
        question: [
            tool_calls(execute_sql(f"SELECT {i} * {i} AS squared")),
            answer(f"{i} squared is {i * i}."),
        ]
        for i, question in enumerate(QUESTIONS.values())
    }
    openai_server.set_script(by_prompt(scripts))
    recorded = run_all(suite, "openai:gpt-4.1", recording=True)

    lines = (suite.root / "recordings" / "openai-gpt-4.1.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["test"] for line in lines) == sorted(list(QUESTIONS) * 2)
    # Replaying all at once, twice, gives every test its own turns every time.
    for _ in range(2):
        replayed = run_all(suite, "replay:openai-gpt-4.1")
        assert [observable(r) for r in replayed] == [observable(r) for r in recorded]
    assert [r.final_text for r in replayed] == [f"{i} squared is {i * i}." for i in range(6)]
    assert [r.queries[0].rows for r in replayed] == [[[i * i]] for i in range(6)]


def test_a_hand_written_line_without_attempt_serves_every_attempt(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    write_recording(
        suite,
        "demo",
        {"_comment": "Hand-written for this test, not recorded from a model."},
        {"test": "q0", "turn": 0, "completion": {"text": "Zero, whatever the attempt."}},
        {"test": "q0", "attempt": 2, "turn": 0, "completion": {"text": "Zero, said attempt 2."}},
    )
    assert rekey(suite, k=3).keyed == 2
    runs = run_all(suite, "replay:demo", k=3)

    assert [r.final_text for r in runs] == [
        "Zero, whatever the attempt.",
        "Zero, whatever the attempt.",
        "Zero, said attempt 2.",
    ]


# ---- what is missing or broken -------------------------------------------------------------------


def test_a_missing_turn_or_test_makes_an_error_run_that_says_which(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"], "q1": QUESTIONS["q1"]})
    write_recording(
        suite,
        "demo",
        {
            "test": "q0",
            "turn": 0,
            "completion": {
                "tool_calls": [{"name": "execute_sql", "arguments": {"sql_query": "SELECT 0"}}]
            },
        },
    )
    rekey(suite)
    stopped_early, unknown = run_all(suite, "replay:demo")

    assert stopped_early.status is RunStatus.ERROR and unknown.status is RunStatus.ERROR
    assert stopped_early.error == (
        "no recording for this request: demo.jsonl has no turn 1 of test 'q0', attempt 0, "
        "purpose 'agent'; record it again with --record, or, for a hand-written recording, "
        "re-key it with `python benchmarks/rekey_recording.py <suite> <recording>`"
    )
    assert unknown.error.startswith(
        "no recording for this request: demo.jsonl has no turn 0 of test 'q1', attempt 0"
    )
    # The turn that was there still ran.
    assert stopped_early.queries[0].rows == [[0]]


def test_replay_missing_names_the_attempt_and_purpose_it_looked_for(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    path = write_recording(suite, "demo", {"test": "q0", "turn": 0, "completion": {"text": "0"}})
    model = ReplayChatModel(Recording(path), "replay:demo")

    async def ask() -> None:
        with call_context("q0", attempt=2, purpose="extraction"):
            await model.complete([ChatMessage("user", "extract")])

    with pytest.raises(ReplayMissing) as caught:
        asyncio.run(ask())
    assert "no turn 0 of test 'q0', attempt 2, purpose 'extraction'" in str(caught.value)

    with pytest.raises(ReplayMissing, match="outside a test's context"):
        asyncio.run(model.complete([ChatMessage("user", "who am I?")]))


def test_comment_and_blank_lines_are_skipped(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    path = write_recording(
        suite,
        "demo",
        {"_comment": "Hand-written demo recording; the answers are made up."},
        "",
        {"test": "q0", "turn": 0, "completion": {"text": "0 squared is 0."}},
    )
    assert list(Recording(path).entries) == [("q0", None, "agent", 0)]


@pytest.mark.parametrize(
    "bad_line",
    [
        '{"test": "q0", "turn": 1, "completion": ',  # torn JSON
        '{"test": "q0", "completion": {"text": "no turn"}}',  # a key missing
        '{"test": "q0", "turn": "second", "completion": {"text": "x"}}',  # not a number
        '{"test": "q0", "turn": 1, "completion": {"tool_calls": [{"arguments": {}}]}}',
    ],
)
def test_a_malformed_line_is_reported_with_file_and_line(tmp_path, bad_line):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    path = write_recording(
        suite,
        "demo",
        {"_comment": "line 1"},
        {"test": "q0", "turn": 0, "completion": {"text": "fine"}},
        bad_line,
    )
    with pytest.raises(ValueError, match=rf"^{path}:3: not a recording entry"):
        Recording(path)

    async def build() -> None:
        async with open_factory(suite) as factory:
            factory.agent("replay:demo")

    with pytest.raises(ValueError, match=r"demo\.jsonl:3: "):
        asyncio.run(build())


def test_an_unknown_recording_lists_the_ones_there_are(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    write_recording(suite, "demo", {"test": "q0", "turn": 0, "completion": {"text": "0"}})

    async def build() -> None:
        async with open_factory(suite) as factory:
            factory.agent("replay:dmeo")

    with pytest.raises(
        UnknownModel, match=r"no recording recordings/dmeo\.jsonl; recordings: replay:demo"
    ):
        asyncio.run(build())


def test_a_conversation_case_replays_only_the_turns_the_agent_generated(tmp_path, openai_server):
    conversation = {
        "conversation": [
            {"role": "user", "content": "Revenue last month?"},
            {"role": "assistant", "content": "780 USD."},
            {"role": "user", "content": "And the month before?"},
        ]
    }
    suite = make_suite(tmp_path, openai_server, cases={"follow_up": conversation})
    openai_server.script(tool_calls(execute_sql("SELECT 2 AS month")), answer("Also 780 USD."))
    (recorded,) = run_all(suite, "openai:gpt-4.1", recording=True)
    (replayed,) = run_all(suite, "replay:openai-gpt-4.1")

    assert replayed.status is RunStatus.COMPLETED
    assert observable(replayed) == observable(recorded)
    # The given assistant turn is part of the transcript, not a recorded completion.
    assert [m["role"] for m in replayed.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert replayed.turns == 2


# ---- a line answers only the request it was recorded for ----------------------------------------


def test_a_recorded_line_is_not_served_for_another_request(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, cases={"revenue": "What is our revenue?"})
    openai_server.script(answer("Revenue is 780 USD."))
    run_all(suite, "openai:gpt-4.1", recording=True)
    path = suite.root / "recordings" / "openai-gpt-4.1.jsonl"
    assert all(len(json.loads(line)["request"]) == 64 for line in path.read_text().splitlines())
    assert run_all(suite, "replay:openai-gpt-4.1")[0].final_text == "Revenue is 780 USD."

    write_case(suite.root, "revenue", "What is our revenue, net of refunds?")
    (replayed,) = run_all(load_suite(suite.root), "replay:openai-gpt-4.1")

    assert replayed.status is RunStatus.ERROR
    assert "780" not in (replayed.final_text or "")  # not the answer to another question
    assert replayed.error.startswith(
        "no recording for this request: openai-gpt-4.1.jsonl line 1 (turn 0 of test 'revenue', "
        "attempt 0, purpose 'agent') was recorded for another request (the messages or tools "
        "differ); record it again with --record"
    )


def test_a_hand_written_line_without_a_request_key_is_not_served_until_re_keyed(tmp_path):
    suite = make_suite(tmp_path, cases={"q0": QUESTIONS["q0"]})
    path = write_recording(
        suite,
        "demo",
        {"_comment": "Hand-written for this test."},
        {"test": "q0", "turn": 0, "completion": {"text": "0 squared is 0."}},
        {"test": "q0", "turn": 1, "completion": {"text": "never asked for"}},
    )
    (unkeyed,) = run_all(suite, "replay:demo")
    assert unkeyed.status is RunStatus.ERROR
    assert (
        "demo.jsonl line 2 (turn 0 of test 'q0', attempt 0, purpose 'agent') carries no "
        "request key; " in unkeyed.error
    )
    assert "benchmarks/rekey_recording.py" in unkeyed.error

    report = rekey(suite)
    assert (report.keyed, report.unused_lines, report.conflicting_lines) == (1, [3], [])
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"_comment": "Hand-written for this test."}  # kept as written
    assert list(json.loads(lines[1])) == ["test", "turn", "request", "completion"]
    assert "request" not in json.loads(lines[2])
    (keyed,) = run_all(suite, "replay:demo")
    assert keyed.status is RunStatus.COMPLETED and keyed.final_text == "0 squared is 0."


def test_a_line_serving_attempts_that_ask_different_things_is_reported_by_the_re_keying(
    tmp_path,
):
    conversation = {"conversation": [{"role": "user", "content": "Revenue?"}]}
    suite = make_suite(tmp_path, cases={"a": conversation, "b": "Orders?"}, k=2)
    write_recording(
        suite,
        "demo",
        {"test": "a", "turn": 0, "completion": {"text": "780 USD."}},
        {"test": "b", "attempt": 0, "turn": 0, "completion": {"text": "12."}},
        {"test": "b", "attempt": 1, "turn": 0, "completion": {"text": "Twelve."}},
    )
    report = rekey(suite)
    assert (report.keyed, report.unused_lines, report.conflicting_lines) == (3, [], [])


def test_the_request_key_ignores_json_key_order_and_nothing_else():
    messages = [ChatMessage("system", "You answer."), ChatMessage("user", "Revenue?")]
    tools = [ToolSpec("execute_sql", "Run SQL", {"type": "object", "required": ["sql_query"]})]
    key = request_hash(messages, tools)
    reordered = [ToolSpec("execute_sql", "Run SQL", {"required": ["sql_query"], "type": "object"})]
    assert request_hash(messages, reordered) == key
    assert request_hash([*messages[:1], ChatMessage("user", "Revenue? ")], tools) != key
    assert request_hash([ChatMessage("system", "You answer."), messages[1]], tools) == key
    assert request_hash(messages, []) != key
    assert (
        request_hash(messages, [ToolSpec("execute_sql", "Run a SQL", tools[0].parameters)]) != key
    )
    assert request_hash([*messages, ChatMessage("assistant", "")], tools) != key

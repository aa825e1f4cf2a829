"""nao assertions and Calibrate tool-call tests against the calls a run made."""

from __future__ import annotations

import asyncio

from eval_pipeline.agents import ToolCallRecord
from eval_pipeline.grading import (
    CheckResult,
    GradeStatus,
    JudgeDecision,
    check_assertions,
    check_tool_calls,
    combine,
    is_subset,
    strict_equal,
)
from eval_pipeline.suite import ArgumentMatcher, ExpectedToolCall, ToolCallAssertion


def call(name: str, **arguments) -> ToolCallRecord:
    return ToolCallRecord(id=name, name=name, arguments=arguments, raw_arguments="")


def test_subset_is_recursive_and_strict_about_booleans():
    assert is_subset({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not is_subset({"a": {"b": 1}}, {"a": {"c": 1}})
    assert is_subset({"xs": [1, {"y": 2}]}, {"xs": [1, {"y": 2, "z": 3}]})
    assert not is_subset({"xs": [1]}, {"xs": [1, 2]})
    assert not is_subset({"flag": True}, {"flag": 1})
    assert strict_equal(1, 1.0) and not strict_equal(True, 1) and not strict_equal(0, False)


def test_assertions_count_matching_calls_and_name_the_miss():
    calls = [
        call("execute_sql", sql_query="SELECT 1"),
        call("execute_sql", sql_query="SELECT 2"),
        call("list_tables"),
    ]
    ok = check_assertions(
        [
            ToolCallAssertion("execute_sql", min_count=2),
            ToolCallAssertion("execute_sql", args={"sql_query": "SELECT 2"}),
        ],
        calls,
    )
    assert ok.status is GradeStatus.PASSED
    missed = check_assertions(
        [ToolCallAssertion("clarification"), ToolCallAssertion("execute_sql", min_count=3)], calls
    )
    assert missed.status is GradeStatus.FAILED
    assert (
        missed.message
        == "expected clarification at least 1x, got 0; expected execute_sql at least 3x, got 2"
    )


def run(coro):
    return asyncio.run(coro)


def test_each_expected_call_needs_a_distinct_actual_call_in_any_order():
    expected = [
        ExpectedToolCall("save", {"topic": ArgumentMatcher("exact", value="fractions")}),
        ExpectedToolCall("save", {"topic": ArgumentMatcher("any")}),
    ]
    one_call = [call("save", topic="fractions")]
    assert run(check_tool_calls(expected, one_call)).status is GradeStatus.FAILED
    # greedy matching would give the "any" call to the first and fail; a real matching passes
    two_calls = [call("save", topic="fractions"), call("save", topic="decimals")]
    assert run(check_tool_calls(list(reversed(expected)), two_calls)).status is GradeStatus.PASSED


def test_exact_matcher_is_deep_and_unlisted_arguments_are_unchecked():
    expected = [ExpectedToolCall("save", {"solved": ArgumentMatcher("exact", value=True)})]
    assert (
        run(check_tool_calls(expected, [call("save", solved=True, extra="x")])).status
        is GradeStatus.PASSED
    )
    failed = run(check_tool_calls(expected, [call("save", solved=1), call("list_tables")]))
    assert failed.status is GradeStatus.FAILED
    assert (
        failed.message
        == "expected tool call(s) not made as specified: save (called: save, list_tables)"
    )
    any_args = [
        ExpectedToolCall(
            "save", {"solved": ArgumentMatcher("exact", value=True)}, accept_any_arguments=True
        )
    ]
    assert run(check_tool_calls(any_args, [call("save")])).status is GradeStatus.PASSED
    missing_arg = [ExpectedToolCall("save", {"topic": ArgumentMatcher("any")})]
    assert run(check_tool_calls(missing_arg, [call("save")])).status is GradeStatus.FAILED


def test_llm_judge_arguments_are_judged_once_and_a_judge_outage_is_an_error():
    asked = []

    async def judge(criteria, value):
        asked.append((criteria, value))
        return JudgeDecision(passed="last month" in value, reasoning="checked the filter")

    expected = [
        ExpectedToolCall(
            "execute_sql",
            {"sql_query": ArgumentMatcher("llm_judge", criteria="filters on last month")},
        )
    ]
    calls = [call("list_tables"), call("execute_sql", sql_query="-- last month\nSELECT 1")]
    result = run(check_tool_calls(expected, calls, judge=judge))
    assert result.status is GradeStatus.PASSED
    assert asked == [("filters on last month", "-- last month\nSELECT 1")]
    assert result.details["judged_arguments"][0]["reasoning"] == "checked the filter"

    async def down(criteria, value):
        return JudgeDecision(None, error="judge unavailable: HTTP 503")

    errored = run(check_tool_calls(expected, calls, judge=down))
    assert errored.status is GradeStatus.ERROR and "HTTP 503" in errored.message
    # a call that cannot match on name fails, whatever the judge
    assert (
        run(check_tool_calls(expected, [call("list_tables")], judge=down)).status
        is GradeStatus.FAILED
    )


def test_verdict_needs_every_check_and_a_failure_outranks_an_error():
    passed = CheckResult("data", GradeStatus.PASSED, "match")
    failed = CheckResult(
        "assertions", GradeStatus.FAILED, "expected clarification at least 1x, got 0"
    )
    error = CheckResult("evaluators", GradeStatus.ERROR, "judge unavailable")
    assert combine([passed]).status is GradeStatus.PASSED
    assert combine([passed, error]).status is GradeStatus.ERROR
    verdict = combine([passed, failed, error])
    assert verdict.status is GradeStatus.FAILED and verdict.message == failed.message
    unverified = combine([])
    assert unverified.status is GradeStatus.PASSED and not unverified.verified

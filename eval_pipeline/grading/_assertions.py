"""nao's `tool_call` assertions: the agent called a tool, with at least these arguments, often enough."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval_pipeline.agents import ToolCallRecord
from eval_pipeline.grading._verdict import CheckResult, GradeStatus
from eval_pipeline.suite import ToolCallAssertion


def is_subset(expected: Any, actual: Any) -> bool:
    """True when `actual` contains `expected`: mappings recursively by key (extra keys
    allowed), lists item by item with the same length, scalars equal. Booleans only equal
    booleans, since `true` and `1` mean different things to a tool."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and is_subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(is_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return strict_equal(expected, actual)


def strict_equal(expected: Any, actual: Any) -> bool:
    """Deep JSON equality where `true` is not `1` (Python says it is), but `1` is `1.0`."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(strict_equal(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(strict_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return expected == actual


def check_assertions(
    assertions: Sequence[ToolCallAssertion], tool_calls: Sequence[ToolCallRecord]
) -> CheckResult:
    """Check every assertion against the run's tool calls; the message names each miss."""
    misses = []
    counts = []
    for assertion in assertions:
        count = sum(
            1
            for call in tool_calls
            if call.name == assertion.tool
            and (assertion.args is None or is_subset(assertion.args, call.arguments or {}))
        )
        counts.append(
            {
                "tool": assertion.tool,
                "args": assertion.args,
                "min_count": assertion.min_count,
                "count": count,
            }
        )
        if count < assertion.min_count:
            with_args = " with the expected arguments" if assertion.args else ""
            misses.append(
                f"expected {assertion.tool}{with_args} at least {assertion.min_count}x, got {count}"
            )
    if misses:
        return CheckResult(
            "assertions", GradeStatus.FAILED, "; ".join(misses), {"assertions": counts}
        )
    return CheckResult("assertions", GradeStatus.PASSED, "assertions hold", {"assertions": counts})

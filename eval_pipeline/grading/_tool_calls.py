"""Calibrate's tool-call tests: each expected call matched by a distinct actual call, in any order."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.agents import ToolCallRecord
from eval_pipeline.grading._assertions import strict_equal
from eval_pipeline.grading._verdict import CheckResult, GradeStatus
from eval_pipeline.suite import ExpectedToolCall


@dataclass(frozen=True)
class JudgeDecision:
    """A judge's answer: `passed` is None when the judge could not decide (error)."""

    passed: bool | None
    reasoning: str = ""
    error: str | None = None
    #: Undecided because the judge did not answer (unreachable, rate-limited, its reply cut):
    #: the next grading asks again. An answer without a verdict is not retried (`Judge`).
    retry: bool = False


# (criteria, argument value) -> decision; the grader passes one bound to the judge model.
ArgumentJudge = Callable[[str, Any], Awaitable[JudgeDecision]]


async def _pair_matches(
    expected: ExpectedToolCall,
    actual: ToolCallRecord,
    judge: ArgumentJudge | None,
    cache: dict[tuple[str, str], JudgeDecision],
    judged: list[dict[str, Any]],
) -> bool | None:
    """True/False when decided; None when a judge was needed and could not decide."""
    if actual.name != expected.tool:
        return False
    if expected.accept_any_arguments:
        return True
    arguments = actual.arguments if actual.arguments is not None else {}
    pending = []
    for name, matcher in expected.arguments.items():
        if name not in arguments:
            return False
        if matcher.match_type == "exact" and not strict_equal(matcher.value, arguments[name]):
            return False
        if matcher.match_type == "llm_judge":
            pending.append((name, matcher.criteria or ""))
    undecided = False
    for name, criteria in pending:
        value = arguments[name]
        cache_key = (criteria, json.dumps(value, sort_keys=True, default=str))
        if cache_key not in cache:
            if judge is None:
                cache[cache_key] = JudgeDecision(
                    None, error="no judge model configured (test.judge_model)"
                )
            else:
                cache[cache_key] = await judge(criteria, value)
            decision = cache[cache_key]
            judged.append(
                {
                    "tool": expected.tool,
                    "argument": name,
                    "criteria": criteria,
                    "value": value,
                    "passed": decision.passed,
                    "reasoning": decision.reasoning,
                    "error": decision.error,
                }
            )
        decision = cache[cache_key]
        if decision.passed is False:
            return False
        if decision.passed is None:
            undecided = True
    return None if undecided else True


def _max_matching(allowed: list[list[bool]], n_actual: int) -> list[int | None]:
    """Maximum bipartite matching (augmenting paths; the sizes here are tiny)."""
    owner: list[int | None] = [None] * n_actual
    match: list[int | None] = [None] * len(allowed)

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(n_actual):
            if allowed[i][j] and j not in seen:
                seen.add(j)
                if owner[j] is None or augment(owner[j], seen):
                    owner[j], match[i] = i, j
                    return True
        return False

    for i in range(len(allowed)):
        augment(i, set())
    return match


async def check_tool_calls(
    expected: Sequence[ExpectedToolCall],
    actual: Sequence[ToolCallRecord],
    *,
    judge: ArgumentJudge | None = None,
) -> CheckResult:
    """Match every expected call to a distinct actual call.

    Args:
        expected: the test's `tool_calls`.
        actual: the calls the agent made, in order.
        judge: decides `llm_judge` arguments; only asked for pairs whose other
            arguments already match, and once per distinct (criteria, value).

    Returns:
        FAILED naming the unmatched expected calls; ERROR when a match depended on a
        judge that could not decide; PASSED otherwise.
    """
    cache: dict[tuple[str, str], JudgeDecision] = {}
    judged: list[dict[str, Any]] = []
    decided = [[await _pair_matches(e, a, judge, cache, judged) for a in actual] for e in expected]
    matching = _max_matching([[d is True for d in row] for row in decided], len(actual))
    unmatched = [i for i, j in enumerate(matching) if j is None]
    details = {
        "matched": [
            {"tool": expected[i].tool, "actual_index": j}
            for i, j in enumerate(matching)
            if j is not None
        ],
        "judged_arguments": judged,
        "actual_tools": [call.name for call in actual],
    }
    if not unmatched:
        return CheckResult(
            "tool_calls",
            GradeStatus.PASSED,
            f"all {len(expected)} expected tool call(s) made",
            details,
        )
    # An unmatched call that an undecided judge might have matched is not a known failure.
    optimistic = _max_matching([[d is not False for d in row] for row in decided], len(actual))
    if all(j is not None for j in optimistic):
        errors = sorted({d["error"] for d in judged if d["error"]})
        return CheckResult(
            "tool_calls",
            GradeStatus.ERROR,
            "tool-call judge unavailable: " + "; ".join(errors),
            details,
            retry=any(d.retry for d in cache.values() if d.passed is None),
        )
    missing = ", ".join(expected[i].tool for i in unmatched)
    called = ", ".join(call.name for call in actual) or "none"
    return CheckResult(
        "tool_calls",
        GradeStatus.FAILED,
        f"expected tool call(s) not made as specified: {missing} (called: {called})",
        details,
    )

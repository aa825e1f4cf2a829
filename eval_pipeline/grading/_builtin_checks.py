"""The built-in checks besides the data check, each an adapter of its test-file part and its grading."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.agents import AgentRun, relabel
from eval_pipeline.grading._assertions import check_assertions
from eval_pipeline.grading._check import Check, CheckContext
from eval_pipeline.grading._reply_checks import check_consistency, check_evaluators
from eval_pipeline.grading._tool_calls import check_tool_calls
from eval_pipeline.grading._verdict import CheckResult
from eval_pipeline.suite import (
    Case,
    Consistency,
    Evaluator,
    ExpectedToolCall,
    FieldReader,
    ToolCallAssertion,
    parse_assertions,
    parse_consistency,
    parse_evaluators,
    parse_tool_calls,
)


class AssertionsCheck(Check):
    """nao's `tool_call` assertions: the agent called a tool at least so often, with args."""

    name = "assertions"

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> tuple[ToolCallAssertion, ...]:
        return parse_assertions(reader, data)

    def settings(self, case: Case) -> tuple[ToolCallAssertion, ...] | None:
        return case.assertions or None

    async def grade(
        self, settings: Sequence[ToolCallAssertion], run: AgentRun, context: CheckContext
    ) -> CheckResult:
        return check_assertions(settings, run.tool_calls)


class ToolCallsCheck(Check):
    """Calibrate's expected tool calls, each matched by a distinct call the agent made."""

    name = "tool_calls"

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> tuple[ExpectedToolCall, ...]:
        return parse_tool_calls(reader, data)

    def settings(self, case: Case) -> tuple[ExpectedToolCall, ...] | None:
        return case.tool_calls or None

    def asks_judge(self, settings: Sequence[ExpectedToolCall]) -> bool:
        """Only when some argument is an `llm_judge` matcher."""
        return any(
            matcher.match_type == "llm_judge"
            for expected in settings
            for matcher in expected.arguments.values()
        )

    async def grade(
        self, settings: Sequence[ExpectedToolCall], run: AgentRun, context: CheckContext
    ) -> CheckResult:
        with relabel("tool_arguments"):
            judge = context.judge.judge_argument if context.judge else None
            return await check_tool_calls(settings, run.tool_calls, judge=judge)


class EvaluatorsCheck(Check):
    """Calibrate's reply tests: the judge decides each criterion about the final reply."""

    name = "evaluators"

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> tuple[Evaluator, ...]:
        return parse_evaluators(reader, data)

    def settings(self, case: Case) -> tuple[Evaluator, ...] | None:
        return case.evaluators or None

    def asks_judge(self, settings: Sequence[Evaluator]) -> bool:
        return True

    async def grade(
        self, settings: Sequence[Evaluator], run: AgentRun, context: CheckContext
    ) -> CheckResult:
        return await check_evaluators(
            settings, context.case.messages, run.final_text, context.judge
        )


class ConsistencyCheck(Check):
    """oxy's consistency test: the replies of a test's runs judged pairwise for agreement."""

    name = "consistency"
    across_runs = True

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> Consistency | None:
        return parse_consistency(reader, data)

    def settings(self, case: Case) -> Consistency | None:
        return case.consistency

    def asks_judge(self, settings: Consistency) -> bool:
        return True

    def runs_needed(self, settings: Consistency) -> int:
        return settings.n

    async def grade_runs(
        self, settings: Consistency, runs: Sequence[AgentRun], context: CheckContext
    ) -> CheckResult:
        replies = [(run.attempt, run.final_text) for run in runs]
        return await check_consistency(settings, context.case.prompt, replies, context.judge)

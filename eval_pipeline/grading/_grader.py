"""Turns stored runs plus their case into grades; never calls the agent under test."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Any

from eval_pipeline.agents import AgentRun, RunStatus, call_context
from eval_pipeline.grading._check import Check, CheckContext, VariantSource, declared_checks
from eval_pipeline.grading._data_check import check_data, preview_records
from eval_pipeline.grading._extraction import Strategy
from eval_pipeline.grading._judges import Judge, judge_label
from eval_pipeline.grading._metrics import RunOutcome
from eval_pipeline.grading._reference import ReferenceResult
from eval_pipeline.grading._verdict import CheckResult, GradeStatus, check_to_dict, combine
from eval_pipeline.suite import Case, CheckKind, Tolerance

if TYPE_CHECKING:
    from eval_pipeline.agents import ChatModel

__all__ = ["Grade", "Grader", "preview_records"]


@dataclass
class Grade:
    """The verdict on one run, with each check's outcome and details."""

    name: str
    model: str
    run_date: date
    attempt: int
    run_key: str
    content_hash: str
    status: GradeStatus
    message: str
    verified: bool
    checks: list[CheckResult] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = None
    duration_ms: float = 0.0
    tool_call_count: int = 0
    judge: str | None = None  # the judge of its judged checks (model, prompt version), if any
    failure_kind: str | None = None  # why a failed data check missed (a `FailureKind`)
    #: With `--rejudge-samples j`: the run's j verdicts, its own first (`judge_self_agreement`).
    judge_samples: list[bool] | None = None

    @property
    def passed(self) -> bool:
        return self.status is GradeStatus.PASSED

    def to_row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "run_date": self.run_date,
            "attempt": self.attempt,
            "run_key": self.run_key,
            "content_hash": self.content_hash,
            "status": self.status.value,
            "passed": self.passed,
            "message": self.message,
            "verified": self.verified,
            "checks": [check_to_dict(c) for c in self.checks],
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "duration_ms": self.duration_ms,
            "tool_call_count": self.tool_call_count,
            "judge": self.judge,
            "failure_kind": self.failure_kind,
            "judge_samples": self.judge_samples,
        }

    def outcome(self) -> RunOutcome:
        """What metrics need of this grade."""
        return RunOutcome.from_grade_row(self.to_row())


def _not_asked(kind: CheckKind) -> CheckResult:
    """A judged check left undecided because another check had already failed the run."""
    return CheckResult(
        kind,
        GradeStatus.SKIPPED,
        "not judged: another check already failed the run "
        "(test.judge_failed_runs: true asks the judge anyway)",
    )


class Grader:
    """Grades runs of cases with the checks each case declares (`eval_pipeline.grading.Check`).

    Args:
        judge_model: the model behind evaluators, `llm_judge` arguments, consistency and
            answer extraction; None makes those checks errors (not failures).
        extraction: "llm" (nao's extraction) or "last_query".
        tolerance: the suite's comparison defaults; a case's `comparison` wins.
        variants: the warehouse variants of a case with `semantic:`, opened (or why there
            are none); without it, the semantic check is skipped with that reason.
        judge_failed_runs: ask the judge about a run that a check no judge decides (data,
            assertions, tool calls without `llm_judge`) has already failed. By default it is
            not asked: its verdict cannot change the run's, and it would cost a judge call
            per failed run (`test.judge_failed_runs`).
    """

    def __init__(
        self,
        *,
        judge_model: ChatModel | None = None,
        extraction: Strategy = "llm",
        tolerance: Tolerance | None = None,
        variants: VariantSource | None = None,
        judge_failed_runs: bool = False,
    ) -> None:
        self.judge_model = judge_model
        self.judge = Judge(judge_model) if judge_model is not None else None
        self.judge_label = judge_label(judge_model.model_id) if judge_model is not None else None
        self.extraction = extraction
        self.tolerance = tolerance or Tolerance()
        self.variants = variants
        self.judge_failed_runs = judge_failed_runs

    def context(self, case: Case, reference: ReferenceResult | None = None) -> CheckContext:
        """What each check of `case` is given besides its settings and the run."""
        return CheckContext(
            case=case,
            reference=reference,
            judge=self.judge,
            judge_model=self.judge_model,
            judge_label=self.judge_label,
            extraction=self.extraction,
            tolerance=self.tolerance,
            variants=self.variants,
        )

    async def grade_case(
        self, case: Case, runs: list[AgentRun], reference: ReferenceResult | None = None
    ) -> list[Grade]:
        """Grade every run of a case; a check across runs (consistency) is decided once."""
        known = await asyncio.gather(*(self._unjudged(case, run, reference) for run in runs))
        completed = [
            (run, checks)
            for run, checks in zip(runs, known, strict=True)
            if run.status is RunStatus.COMPLETED
        ]
        across: list[CheckResult] = []
        for check, settings in declared_checks(case):
            if not check.across_runs:
                continue
            asks_judge = check.asks_judge(settings)
            if asks_judge and completed and all(self._decided(c) for _, c in completed):
                across.append(_not_asked(check.name))
                continue
            with call_context(case.name, 0, check.name):
                decided = await check.grade_runs(
                    settings, [run for run, _ in completed], self.context(case, reference)
                )
            across.append(self._signed(decided))
        return list(
            await asyncio.gather(
                *(
                    self._grade(case, run, checks, across, reference)
                    for run, checks in zip(runs, known, strict=True)
                )
            )
        )

    async def grade_run(
        self,
        case: Case,
        run: AgentRun,
        reference: ReferenceResult | None,
        across_runs: Sequence[CheckResult] = (),
    ) -> Grade:
        """Grade one run; `across_runs`: the results of the case's checks across runs."""
        known = await self._unjudged(case, run, reference)
        return await self._grade(case, run, known, across_runs, reference)

    async def check_data(
        self, case: Case, run: AgentRun, reference: ReferenceResult | None
    ) -> CheckResult:
        """The data check alone: the agent's answer compared, as data, with the reference."""
        return await check_data(case, run, self.context(case, reference))

    def _decided(self, checks: list[CheckResult]) -> bool:
        """Whether these checks already fail the run, so that no judge is asked about it
        (unless `judge_failed_runs`): a known failure outranks any judged verdict."""
        return not self.judge_failed_runs and any(c.status is GradeStatus.FAILED for c in checks)

    async def _grade(
        self,
        case: Case,
        run: AgentRun,
        known: list[CheckResult],
        across_runs: Sequence[CheckResult],
        reference: ReferenceResult | None = None,
    ) -> Grade:
        if run.status is RunStatus.ERROR:
            checks: list[CheckResult] = []
            status, message, verified = (
                GradeStatus.ERROR,
                run.error or "the run failed",
                bool(case.kinds),
            )
        else:
            with call_context(case.name, run.attempt, "grading"):
                checks = await self._judged(case, run, known, reference)
            checks.extend(across_runs)
            verdict = combine(checks)
            status, message, verified = verdict.status, verdict.message, verdict.verified
        return Grade(
            name=case.name,
            model=run.model,
            run_date=run.run_date,
            attempt=run.attempt,
            run_key=run.key,
            content_hash=case.content_hash,
            status=status,
            message=message,
            verified=verified,
            checks=checks,
            tokens=run.usage.total_tokens,
            cost_usd=run.cost_usd,
            duration_ms=run.duration_ms,
            tool_call_count=len(run.tool_calls),
            judge=next((c.judge for c in checks if c.judge), None),
            # Why a failed data check missed: the one check that says (`FailureKind`).
            failure_kind=next(
                (c.details["failure_kind"] for c in checks if "failure_kind" in c.details), None
            ),
        )

    def _signed(self, check: CheckResult) -> CheckResult:
        """The check with the judge that decided it, when a judge did."""
        details = check.details
        decided_by_judge = (
            details.get("evaluators")
            or details.get("pairs")
            or details.get("judged_arguments")
            or details.get("extraction_model")
        )
        if self.judge_label is None or not decided_by_judge:
            return check
        return replace(check, judge=self.judge_label)

    def _per_run(self, case: Case, *, judged: bool) -> list[tuple[Check, Any]]:
        """The case's checks decided run by run that a judge decides (or not)."""
        return [
            (check, settings)
            for check, settings in declared_checks(case)
            if not check.across_runs and check.asks_judge(settings) == judged
        ]

    async def _unjudged(
        self, case: Case, run: AgentRun, reference: ReferenceResult | None
    ) -> list[CheckResult]:
        """The checks no judge decides: the data comparison (an extraction model may pick
        the answer's table; the comparison decides), assertions, and tool calls without an
        `llm_judge` argument. None for a run that failed: it has no check."""
        if run.status is RunStatus.ERROR:
            return []
        context = self.context(case, reference)
        with call_context(case.name, run.attempt, "grading"):
            decided = await asyncio.gather(
                *(
                    check.grade(settings, run, context)
                    for check, settings in self._per_run(case, judged=False)
                )
            )
        return [self._signed(check) for check in decided]

    async def _judged(
        self,
        case: Case,
        run: AgentRun,
        known: list[CheckResult],
        reference: ReferenceResult | None,
    ) -> list[CheckResult]:
        """`known` with the checks a judge decides (evaluators, tool calls with an
        `llm_judge` argument), each marked not asked when `known` already fails the run;
        in the order of the registry (`checks`)."""
        asked = self._per_run(case, judged=True)
        if self._decided(known):
            judged = [_not_asked(check.name) for check, _ in asked]
        else:
            context = self.context(case, reference)
            decided = await asyncio.gather(
                *(check.grade(settings, run, context) for check, settings in asked)
            )
            judged = [self._signed(check) for check in decided]
        order = [check.name for check, _ in declared_checks(case)]
        return sorted(
            [*known, *judged],
            key=lambda c: order.index(c.kind) if c.kind in order else len(order),
        )

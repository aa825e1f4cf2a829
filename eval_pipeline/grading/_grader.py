"""Turns stored runs plus their case into grades; never calls the agent under test."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd

from eval_pipeline.agents import AgentRun, RunStatus, call_context, relabel
from eval_pipeline.grading._assertions import check_assertions
from eval_pipeline.grading._compare import Comparison, compare_results, exact_match, same_cells
from eval_pipeline.grading._extraction import (
    Extraction,
    Strategy,
    _unique,
    extract_answer,
    rerun_extraction,
)
from eval_pipeline.grading._failure_kind import classify_failure
from eval_pipeline.grading._judges import Judge, judge_label
from eval_pipeline.grading._metrics import RunOutcome
from eval_pipeline.grading._reference import ReferenceResult, frame_from_rows
from eval_pipeline.grading._reply_checks import check_consistency, check_evaluators
from eval_pipeline.grading._semantic import AgentQuery, SemanticCheck, semantic_check
from eval_pipeline.grading._tool_calls import check_tool_calls
from eval_pipeline.grading._verdict import CheckResult, GradeStatus, check_to_dict, combine
from eval_pipeline.sandbox import sql_is_ordered
from eval_pipeline.suite import Case, CheckKind, Tolerance

if TYPE_CHECKING:
    from eval_pipeline.agents import ChatModel
    from eval_pipeline.sandbox import SqlSandbox

#: The warehouse variants of a case's semantic check, opened, or why there are none.
VariantSource = Callable[[Case], "Sequence[SqlSandbox] | str"]

DATA_PREVIEW_ROWS = 200  # rows of actual/expected/diff kept in a grade, for people to read


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


_ISO_DATE_TIME = (
    r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?"
)


def _dates_as_timestamps(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns of ISO 8601 dates and timestamps as timestamps, for the comparison.

    Stored results keep DATE and TIMESTAMP values as ISO text (`to_json_safe`), so without
    this a reference `DATE '2024-01-03'` and an answer `TIMESTAMP '2024-01-03 00:00:00'`
    would compare as the strings `2024-01-03` and `2024-01-03T00:00:00`, and a date would
    not equal the midnight timestamp of its day.
    """
    converted = frame
    for position in range(frame.shape[1]):
        values = frame.iloc[:, position].dropna()
        if values.empty or not all(isinstance(v, str) for v in values):
            continue
        if not values.str.fullmatch(_ISO_DATE_TIME).all():
            continue
        try:
            parsed = pd.to_datetime(frame.iloc[:, position], format="ISO8601", utc=True)
        except (TypeError, ValueError, OverflowError):
            continue
        if converted is frame:
            converted = frame.copy()
        converted.isetitem(position, parsed)
    return converted


def _compare_as_data(actual: pd.DataFrame, expected: pd.DataFrame, **options: Any) -> Comparison:
    # Most answers are the reference's rows themselves: no dates to convert, nothing to diff.
    identical = exact_match(actual, expected)
    if identical is not None:
        return identical
    compared = _dates_as_timestamps(actual), _dates_as_timestamps(expected)
    comparison = compare_results(*compared, **options)
    if comparison.diff.empty or (compared[0] is actual and compared[1] is expected):
        return comparison
    return replace(comparison, diff=_as_written(comparison.diff, (actual, expected), compared))


def _as_written(
    diff: pd.DataFrame,
    written: tuple[pd.DataFrame, pd.DataFrame],
    compared: tuple[pd.DataFrame, pd.DataFrame],
) -> pd.DataFrame:
    """The diff with each date or timestamp as the result spelled it (`2024-01-03`), not as the
    UTC timestamp it was compared as (which a person would read as `2024-01-03T00:00:00Z`).

    A diff row is row `_row` of its side's frame, so a cell is looked up in that row: in the
    column of the same name, else the same place, else any converted cell of the same time."""
    shown = diff.astype(object)
    for index, (side, row) in enumerate(zip(diff["_side"], diff["_row"], strict=True)):
        which = 0 if str(side).startswith("actual") else 1
        original, converted = written[which], compared[which]
        names = [str(name).casefold() for name in converted.columns]
        for column, name in enumerate(shown.columns[2:]):
            value = shown.iat[index, column + 2]
            if not isinstance(value, pd.Timestamp):
                continue
            named = [p for p, n in enumerate(names) if n == str(name).casefold()]
            for position in [*named, column, *range(len(names))]:
                if position >= len(names):
                    continue
                candidate = converted.iat[row, position]
                if isinstance(candidate, pd.Timestamp) and candidate == value:
                    shown.iat[index, column + 2] = original.iat[row, position]
                    break
    return shown


def _final_sql(run: AgentRun, extraction: Extraction) -> str | None:
    """The agent's final query: the one its answer came from, else its last successful one."""
    if extraction.source == "last_query" and extraction.query:
        return extraction.query
    successful = [q for q in run.queries if q.error is None and q.sql]
    return successful[-1].sql if successful else None


def preview_records(columns: list[str], rows: list[list[Any]]) -> list[dict[str, Any]]:
    """The first rows of a result as a grade keeps them for people to read: what `_records`
    gives for `frame_from_rows(columns, rows)`, without building the frame when every value
    is one JSON writes as it is (null, a boolean, an integer, a text)."""
    head = rows[:DATA_PREVIEW_ROWS]
    # `SELECT region, region`: a record holds each name once (`region, region_1`).
    names = columns if len(set(columns)) == len(columns) else _unique(columns)
    width = len(names)
    if (
        width
        and all(len(row) == width for row in head)
        and all(value is None or type(value) in (bool, int, str) for row in head for value in row)
    ):
        return [dict(zip(names, row, strict=True)) for row in head]
    return _records(frame_from_rows(names, rows)) or []


def _records(frame: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    if frame is None:
        return None
    if frame.empty and len(frame.index) == 0:  # what to_json gives, without pandas' cost per run
        return []
    head = frame.head(DATA_PREVIEW_ROWS)
    if not head.columns.is_unique:  # `SELECT region, region`: a record holds each name once
        head = head.set_axis(_unique([str(name) for name in head.columns]), axis=1)
    return json.loads(head.to_json(orient="records", date_format="iso", default_handler=str))


#: The order of a grade's checks, whichever was decided first.
_CHECK_ORDER = ("data", "assertions", "tool_calls", "evaluators", "consistency")


def _judges_arguments(case: Case) -> bool:
    """Whether a judge decides some argument of the case's expected tool calls."""
    return any(
        matcher.match_type == "llm_judge"
        for expected in case.tool_calls
        for matcher in expected.arguments.values()
    )


def _not_asked(kind: CheckKind) -> CheckResult:
    """A judged check left undecided because another check had already failed the run."""
    return CheckResult(
        kind,
        GradeStatus.SKIPPED,
        "not judged: another check already failed the run "
        "(test.judge_failed_runs: true asks the judge anyway)",
    )


class Grader:
    """Grades runs of cases.

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

    async def grade_case(
        self, case: Case, runs: list[AgentRun], reference: ReferenceResult | None = None
    ) -> list[Grade]:
        """Grade every run of a case; consistency is judged once across the runs."""
        known = await asyncio.gather(*(self._unjudged(case, run, reference) for run in runs))
        consistency = None
        if case.consistency is not None:
            completed = [
                (run, checks)
                for run, checks in zip(runs, known, strict=True)
                if run.status is RunStatus.COMPLETED
            ]
            if completed and all(self._decided(checks) for _, checks in completed):
                consistency = _not_asked("consistency")
            else:
                replies = [(run.attempt, run.final_text) for run, _ in completed]
                with call_context(case.name, 0, "consistency"):
                    consistency = self._signed(
                        await check_consistency(case.consistency, case.prompt, replies, self.judge)
                    )
        return list(
            await asyncio.gather(
                *(
                    self._grade(case, run, checks, consistency)
                    for run, checks in zip(runs, known, strict=True)
                )
            )
        )

    async def grade_run(
        self,
        case: Case,
        run: AgentRun,
        reference: ReferenceResult | None,
        consistency: CheckResult | None = None,
    ) -> Grade:
        known = await self._unjudged(case, run, reference)
        return await self._grade(case, run, known, consistency)

    def _decided(self, checks: list[CheckResult]) -> bool:
        """Whether these checks already fail the run, so that no judge is asked about it
        (unless `judge_failed_runs`): a known failure outranks any judged verdict."""
        return not self.judge_failed_runs and any(c.status is GradeStatus.FAILED for c in checks)

    async def _grade(
        self,
        case: Case,
        run: AgentRun,
        known: list[CheckResult],
        consistency: CheckResult | None,
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
                checks = await self._judged(case, run, known)
            if consistency is not None:
                checks.append(consistency)
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
            failure_kind=next(
                (c.details.get("failure_kind") for c in checks if c.kind == "data"), None
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

    async def _unjudged(
        self, case: Case, run: AgentRun, reference: ReferenceResult | None
    ) -> list[CheckResult]:
        """The checks no judge decides: the data comparison (an extraction model may pick
        the answer's table; the comparison decides), assertions, and tool calls without an
        `llm_judge` argument. None for a run that failed: it has no check."""
        if run.status is RunStatus.ERROR:
            return []
        pending = []
        with call_context(case.name, run.attempt, "grading"):
            if case.sql is not None:
                pending.append(self.check_data(case, run, reference))
            if case.tool_calls and not _judges_arguments(case):
                pending.append(self.check_tool_calls(case, run))
            checks = [self._signed(check) for check in await asyncio.gather(*pending)]
        if case.assertions:
            checks.append(check_assertions(case.assertions, run.tool_calls))
        return checks

    async def _judged(
        self, case: Case, run: AgentRun, known: list[CheckResult]
    ) -> list[CheckResult]:
        """`known` with the checks a judge decides (evaluators, tool calls with an
        `llm_judge` argument), each marked not asked when `known` already fails the run;
        in the order the test lists its kinds of check."""
        kinds: list[CheckKind] = []
        if case.tool_calls and _judges_arguments(case):
            kinds.append("tool_calls")
        if case.evaluators:
            kinds.append("evaluators")
        if self._decided(known):
            judged = [_not_asked(kind) for kind in kinds]
        else:
            asked = {
                "tool_calls": lambda: self.check_tool_calls(case, run),
                "evaluators": lambda: check_evaluators(
                    case.evaluators, case.messages, run.final_text, self.judge
                ),
            }
            decided = await asyncio.gather(*(asked[kind]() for kind in kinds))
            judged = [self._signed(check) for check in decided]
        return sorted([*known, *judged], key=lambda check: _CHECK_ORDER.index(check.kind))

    async def check_tool_calls(self, case: Case, run: AgentRun) -> CheckResult:
        with relabel("tool_arguments"):
            judge = self.judge.judge_argument if self.judge else None
            return await check_tool_calls(case.tool_calls, run.tool_calls, judge=judge)

    async def check_data(
        self, case: Case, run: AgentRun, reference: ReferenceResult | None
    ) -> CheckResult:
        """Compare the agent's answer, as data, with the reference result."""
        details: dict[str, Any] = {"reference_sql": case.sql}
        if reference is not None and reference.warnings:
            details["reference_warnings"] = reference.warnings
        if reference is None:
            return CheckResult(
                "data",
                GradeStatus.ERROR,
                "no reference result for this date: materialize reference_results",
                details,
                retry=True,  # the next evaluation runs the references first
            )
        if reference.error:
            return CheckResult("data", GradeStatus.ERROR, reference.error, details)
        if reference.truncated:
            return CheckResult(
                "data",
                GradeStatus.ERROR,
                f"the reference result has more than {reference.row_count:,} rows; it cannot be compared whole",
                details,
            )
        details["expected_data"] = preview_records(reference.columns, reference.rows)
        with relabel("extraction"):
            extraction = await extract_answer(
                run, reference.columns, strategy=self.extraction, model=self.judge_model
            )
        details.update(
            extraction_source=extraction.source,
            extraction_query=extraction.query,
            extraction_model=extraction.model,
        )
        if extraction.status == "error":
            return CheckResult(
                "data", GradeStatus.ERROR, extraction.message, details, retry=extraction.retry
            )
        if extraction.status == "no_answer":
            return CheckResult(
                "data", GradeStatus.FAILED, f"no answer data: {extraction.message}", details
            )
        tolerance = case.comparison or self.tolerance
        ordered = case.ordered if case.ordered is not None else sql_is_ordered(case.sql or "")
        compare = partial(
            _compare_as_data,
            ordered=ordered,
            decimals=tolerance.decimals,
            rtol=tolerance.rtol,
            atol=tolerance.atol,
        )
        assert extraction.columns is not None  # an "ok" extraction has its table
        actual_rows = extraction.rows or []
        if same_cells(extraction.columns, actual_rows, reference.columns, reference.rows):
            # The reference's rows themselves: a match under every rule, with nothing to diff.
            passed, message, diff = True, "match", []
        else:
            comparison = compare(extraction.frame, reference.to_frame())
            passed, message = comparison.passed, comparison.message
            diff = _records(comparison.diff) or []
        details.update(
            actual_data=preview_records(extraction.columns, actual_rows),
            ordered=ordered,
            # The tolerances this verdict was reached with (nao's `details.comparison`).
            comparison={
                "rtol": tolerance.rtol,
                "atol": tolerance.atol,
                "decimals": tolerance.decimals,
            },
            diff=diff,
        )
        if passed and case.semantic is not None:
            semantic = self._semantic_check(case, run, extraction, compare)
            details["semantic"] = {
                "status": semantic.status,
                "message": semantic.message,
                "variant": semantic.variant,
            }
            if not semantic.passed:
                return self._failed(case, run, extraction, semantic.message, details)
        if passed:
            return CheckResult("data", GradeStatus.PASSED, message, details)
        return self._failed(case, run, extraction, message, details)

    @staticmethod
    def _failed(
        case: Case, run: AgentRun, extraction: Extraction, message: str, details: dict[str, Any]
    ) -> CheckResult:
        """A failed comparison, with the kind of mistake when the agent's final SQL is known.
        A run with no answer data gets no kind: there is no answer whose query to compare."""
        final_sql = _final_sql(run, extraction)
        if final_sql is not None:
            reason = classify_failure(final_sql, case.sql or "")
            details.update(failure_kind=reason.kind.value, failure_detail=reason.detail)
            message = f"{message} [{reason}]"
        return CheckResult("data", GradeStatus.FAILED, message, details)

    def _semantic_check(
        self,
        case: Case,
        run: AgentRun,
        extraction: Extraction,
        compare: Callable[[pd.DataFrame, pd.DataFrame], Comparison],
    ) -> SemanticCheck:
        """The case's semantic check of an answer that matched on the warehouse."""
        agent: str | AgentQuery | None
        if extraction.source == "answer":
            return SemanticCheck("skipped", "skipped: the agent sent only its answer, no SQL")
        if extraction.source == "llm" and extraction.query:
            agent = rerun_extraction(run.queries, extraction.query)
        else:
            agent = extraction.query
        if self.variants is None:
            return SemanticCheck("skipped", "skipped: no warehouse variants were given")
        variants = self.variants(case)
        if isinstance(variants, str):
            return SemanticCheck("skipped", f"skipped: {variants}")
        assert case.semantic is not None and case.sql is not None
        return semantic_check(case.sql, agent, variants[: case.semantic.variants], compare)

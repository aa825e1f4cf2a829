"""The data check: the agent's answer, taken from its queries, compared as data with the reference SQL's result (and, with `semantic:`, on perturbed warehouses)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import pandas as pd

from eval_pipeline.agents import AgentRun, relabel
from eval_pipeline.grading._check import Check, CheckContext
from eval_pipeline.grading._compare import Comparison, compare_results, exact_match, same_cells
from eval_pipeline.grading._extraction import (
    Extraction,
    _unique,
    extract_answer,
    rerun_extraction,
)
from eval_pipeline.grading._failure_kind import classify_failure
from eval_pipeline.grading._reference import frame_from_rows
from eval_pipeline.grading._semantic import AgentQuery, SemanticCheck, semantic_check
from eval_pipeline.grading._verdict import CheckResult, GradeStatus
from eval_pipeline.sandbox import sql_is_ordered
from eval_pipeline.suite import Case, FieldReader

DATA_PREVIEW_ROWS = 200  # rows of actual/expected/diff kept in a grade, for people to read

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


class DataCheck(Check):
    """The check of a test with `sql`: its fields (`sql`, `ordered`, `comparison`,
    `semantic`) are the test's reference, which the pipeline runs on its own, so the test
    file's reader parses them and this check reads them from the case."""

    name = "data"
    fields = ()

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> None:
        return None

    def settings(self, case: Case) -> Case | None:
        return case if case.sql is not None else None

    async def grade(self, settings: Case, run: AgentRun, context: CheckContext) -> CheckResult:
        return await check_data(settings, run, context)


async def check_data(case: Case, run: AgentRun, context: CheckContext) -> CheckResult:
    """Compare the agent's answer, as data, with the reference result."""
    reference = context.reference
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
            run, reference.columns, strategy=context.extraction, model=context.judge_model
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
    tolerance = case.comparison or context.tolerance
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
        semantic = _semantic_check(case, run, extraction, compare, context)
        details["semantic"] = {
            "status": semantic.status,
            "message": semantic.message,
            "variant": semantic.variant,
        }
        if not semantic.passed:
            return _failed(case, run, extraction, semantic.message, details)
    if passed:
        return CheckResult("data", GradeStatus.PASSED, message, details)
    return _failed(case, run, extraction, message, details)


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
    case: Case,
    run: AgentRun,
    extraction: Extraction,
    compare: Callable[[pd.DataFrame, pd.DataFrame], Comparison],
    context: CheckContext,
) -> SemanticCheck:
    """The case's semantic check of an answer that matched on the warehouse."""
    agent: str | AgentQuery | None
    if extraction.source == "answer":
        return SemanticCheck("skipped", "skipped: the agent sent only its answer, no SQL")
    if extraction.source == "llm" and extraction.query:
        agent = rerun_extraction(run.queries, extraction.query)
    else:
        agent = extraction.query
    if context.variants is None:
        return SemanticCheck("skipped", "skipped: no warehouse variants were given")
    variants = context.variants(case)
    if isinstance(variants, str):
        return SemanticCheck("skipped", f"skipped: {variants}")
    assert case.semantic is not None and case.sql is not None
    return semantic_check(case.sql, agent, variants[: case.semantic.variants], compare)

"""`Grader.grade_case` end to end: a small warehouse, its reference results, and stored runs.

No agent is called anywhere: runs are records, as the grading stage reads them back from the
store. Judge and extraction calls go to a scripted OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.agents import AgentRun, QueryRecord, RunStatus, ToolCallRecord
from eval_pipeline.grading import (
    Grade,
    Grader,
    GradeStatus,
    ReferenceResult,
    frame_from_rows,
    run_references,
)
from eval_pipeline.grading._grader import (  # the unit itself: the preview's fast path
    preview_records,
)
from eval_pipeline.sandbox import SqlSandbox
from eval_pipeline.store import FileCompletionCache, StateFolder
from eval_pipeline.suite import Case, Consistency, Evaluator, Tolerance, ToolCallAssertion
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    error,
    repeat,
)
from eval_pipeline_tests.grading.stored_runs import make_case, make_run, with_judge

BY_REGION = "SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region"
EXPECTED = {"north": 250.5, "south": 99.99, "west": 40.0}  # what BY_REGION returns


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[SqlSandbox]:
    """A tiny shop warehouse, opened read-only as the reference stage opens it."""
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            "CREATE TABLE orders AS SELECT * FROM (VALUES "
            "(1, 'north', 100.0, DATE '2024-01-03'), (2, 'north', 150.5, DATE '2024-01-09'), "
            "(3, 'south', 99.99, DATE '2024-02-11'), (4, 'west', 40.0, DATE '2024-03-30')"
            ") AS t(id, region, amount, order_date)"
        )
    with SqlSandbox.for_file(path) as sandbox:
        yield sandbox


@pytest.fixture
def judge_server() -> Iterator[ScriptedServer]:
    """The judge and extraction model, OpenAI-compatible, scripted per test."""
    with ScriptedServer("openai") as server:
        yield server


def reference_for(case: Case, warehouse: SqlSandbox) -> ReferenceResult:
    [reference] = run_references([case], warehouse)
    return reference


def grade(
    case: Case,
    runs: list[AgentRun],
    reference: ReferenceResult | None,
    grader: Grader | None = None,
) -> list[Grade]:
    return asyncio.run((grader or Grader()).grade_case(case, runs, reference))


def grade_one(case, run, reference, grader=None) -> Grade:
    [one] = grade(case, [run], reference, grader)
    return one


# ---- data ------------------------------------------------------------------------------------


def test_a_right_answer_passes_with_match(warehouse):
    case = make_case(sql=BY_REGION)
    reference = reference_for(case, warehouse)
    # another row order, other letter case, number strings, an extra column: the same data
    run = make_run(
        answer_rows=[["west", "$40.00", 1], ["south", "$99.99", 1], ["north", "$250.50", 2]],
        columns=("Region", "REVENUE", "orders"),
    )
    graded = grade_one(case, run, reference)

    assert graded.status is GradeStatus.PASSED and graded.passed
    assert graded.message == "match" and graded.verified
    [check] = graded.checks
    assert check.kind == "data" and check.details["ordered"] is False
    assert check.details["extraction_source"] == "answer"
    assert sorted(map(tuple, (d.values() for d in check.details["expected_data"]))) == sorted(
        EXPECTED.items()
    )
    assert check.details["diff"] == []
    row = graded.to_row()
    assert row["status"] == "passed" and row["checks"][0]["status"] == "passed"


def test_a_wrong_value_fails_naming_the_differing_cell(warehouse):
    case = make_case(sql=BY_REGION)
    run = make_run(answer_rows=[["north", 250.5], ["south", 89.99], ["west", 40.0]])
    graded = grade_one(case, run, reference_for(case, warehouse))

    assert graded.status is GradeStatus.FAILED
    assert "column 'revenue'" in graded.message
    assert "actual 89.99, expected 99.99" in graded.message
    diff = graded.checks[0].details["diff"]
    assert {(d["_side"], d["region"], d["revenue"]) for d in diff} == {
        ("actual only", "south", 89.99),
        ("expected only", "south", 99.99),
    }


def test_an_outer_order_by_makes_the_comparison_ordered(warehouse):
    reordered = make_run(answer_rows=[["south", 99.99], ["north", 250.5], ["west", 40.0]])

    ordered_case = make_case(sql=BY_REGION + " ORDER BY revenue DESC")
    failed = grade_one(ordered_case, reordered, reference_for(ordered_case, warehouse))
    assert failed.status is GradeStatus.FAILED
    assert failed.checks[0].details["ordered"] is True
    assert "differs at row 0" in failed.message

    unordered_case = make_case(sql=BY_REGION)
    passed = grade_one(unordered_case, reordered, reference_for(unordered_case, warehouse))
    assert passed.status is GradeStatus.PASSED

    # an ORDER BY inside a subquery orders nothing the caller sees
    inner = make_case(sql=f"SELECT * FROM ({BY_REGION} ORDER BY revenue) AS t")
    assert grade_one(inner, reordered, reference_for(inner, warehouse)).passed

    # and the case's own `ordered` wins over what the SQL says
    relaxed = make_case(sql=BY_REGION + " ORDER BY revenue DESC", ordered=False)
    assert grade_one(relaxed, reordered, reference_for(relaxed, warehouse)).passed


def test_the_cases_comparison_wins_over_the_suite_default(warehouse):
    close = make_run(answer_rows=[["north", 250.5], ["south", 100.2], ["west", 40.0]])
    strict, loose = Tolerance(decimals=2), Tolerance(decimals=0)

    lenient_case = make_case(sql=BY_REGION, comparison=loose)
    reference = reference_for(lenient_case, warehouse)
    assert grade_one(lenient_case, close, reference, Grader(tolerance=strict)).passed

    strict_case = make_case(sql=BY_REGION, comparison=strict)
    graded = grade_one(strict_case, close, reference, Grader(tolerance=loose))
    assert graded.status is GradeStatus.FAILED
    # with no override, the suite default applies
    assert grade_one(make_case(sql=BY_REGION), close, reference, Grader(tolerance=loose)).passed


def test_regrading_with_a_new_tolerance_changes_the_verdict_without_the_agent(warehouse):
    case = make_case(sql=BY_REGION)
    reference = reference_for(case, warehouse)
    runs = [
        make_run(answer_rows=[["north", 250.5], ["south", 100.004], ["west", 40.0]], attempt=0),
        make_run(answer_rows=[["north", 250.5], ["south", 99.99], ["west", 40.0]], attempt=1),
    ]
    before = copy.deepcopy([run.to_dict() for run in runs])  # to_dict shares the run's lists

    first = grade(case, runs, reference, Grader(tolerance=Tolerance(decimals=2)))
    assert [g.status for g in first] == [GradeStatus.FAILED, GradeStatus.PASSED]
    regraded = grade(case, runs, reference, Grader(tolerance=Tolerance(decimals=2, atol=0.02)))
    assert [g.status for g in regraded] == [GradeStatus.PASSED, GradeStatus.PASSED]

    assert [run.to_dict() for run in runs] == before  # the stored runs are only read
    assert [g.run_key for g in regraded] == [run.key for run in runs]


def test_a_reference_sql_error_is_an_error_not_a_failure(warehouse):
    case = make_case(sql="SELECT region, SUM(amount) AS revenue FROM order_lines GROUP BY 1")
    reference = reference_for(case, warehouse)
    assert reference.error is not None
    graded = grade_one(case, make_run(answer_rows=[["north", 250.5]]), reference)

    assert graded.status is GradeStatus.ERROR
    assert graded.message.startswith("the reference SQL failed: ")
    assert "order_lines" in graded.message
    missing = grade_one(case, make_run(answer_rows=[["north", 250.5]]), None)
    assert missing.status is GradeStatus.ERROR
    assert "materialize reference_results" in missing.message


def test_the_agents_last_query_is_its_answer_with_last_query_extraction(warehouse):
    case = make_case(sql=BY_REGION)
    queries = [
        QueryRecord("q1", "SELECT region FROM orders", ["region"], ["VARCHAR"], [["north"]], 1),
        QueryRecord(
            "q2",
            "SELECT region, SUM(amount) FROM orders GROUP BY 1",
            ["region", "sum(amount)"],
            ["VARCHAR", "DECIMAL(38,2)"],
            [[region, value] for region, value in EXPECTED.items()],
            3,
        ),
        QueryRecord("q3", "SELECT oops", error="Binder Error: oops"),
    ]
    graded = grade_one(
        case,
        make_run(queries=queries),
        reference_for(case, warehouse),
        Grader(extraction="last_query"),
    )

    assert graded.status is GradeStatus.PASSED
    assert graded.message == "match (columns matched by values: actual 'sum(amount)' as 'revenue')"
    assert graded.checks[0].details["extraction_query"] == queries[1].sql


@pytest.mark.parametrize(
    ("answer_sql", "passes"),
    [
        ("SELECT TIMESTAMP '2024-01-03 00:00:00' AS first_order", True),
        ("SELECT TIMESTAMPTZ '2024-01-03 00:00:00+00' AS first_order", True),
        ("SELECT DATE '2024-01-03' AS first_order", True),
        ("SELECT TIMESTAMP '2024-01-03 09:30:00' AS first_order", False),
        ("SELECT DATE '2024-01-04' AS first_order", False),
    ],
)
def test_a_date_equals_the_midnight_timestamp_of_that_day(warehouse, answer_sql, passes):
    # stored results hold dates and timestamps as ISO text; they still compare as times
    case = make_case(sql="SELECT MIN(order_date) AS first_order FROM orders")
    result = warehouse.execute(answer_sql)
    query = QueryRecord(
        "q1", answer_sql, result.columns, result.column_types, [list(r) for r in result.rows], 1
    )
    graded = grade_one(
        case,
        make_run(queries=[query]),
        reference_for(case, warehouse),
        Grader(extraction="last_query"),
    )
    assert graded.passed is passes, graded.message


@pytest.mark.parametrize(
    ("answer_sql", "actual"),
    [
        ("SELECT DATE '2024-01-04' AS first_order", "2024-01-04"),
        ("SELECT TIMESTAMP '2024-01-03 09:30:00' AS first_order", "2024-01-03T09:30:00"),
    ],
)
def test_a_differing_date_is_kept_in_the_diff_as_the_results_wrote_it(
    warehouse, answer_sql, actual
):
    # compared as UTC timestamps, shown as written: no midnight, no zone the data never had
    case = make_case(sql="SELECT MIN(order_date) AS first_order FROM orders")
    result = warehouse.execute(answer_sql)
    query = QueryRecord(
        "q1", answer_sql, result.columns, result.column_types, [list(r) for r in result.rows], 1
    )
    graded = grade_one(
        case,
        make_run(queries=[query]),
        reference_for(case, warehouse),
        Grader(extraction="last_query"),
    )
    diff = graded.checks[0].details["diff"]
    assert [(row["_side"], row["first_order"]) for row in diff] == [
        ("actual only", actual),
        ("expected only", "2024-01-03"),
    ]
    assert graded.checks[0].details["expected_data"] == [{"first_order": "2024-01-03"}]


# ---- run status and verdicts ---------------------------------------------------------------


def test_a_run_that_errored_is_graded_error_with_its_reason(warehouse):
    case = make_case(sql=BY_REGION)
    broken = make_run(
        status=RunStatus.ERROR,
        error="http:my-agent: timed out after 3 attempts (HTTP 504)",
    )
    graded = grade_one(case, broken, reference_for(case, warehouse))

    assert graded.status is GradeStatus.ERROR
    assert graded.message == "http:my-agent: timed out after 3 attempts (HTTP 504)"
    assert graded.checks == [] and graded.verified


def test_a_case_without_checks_passes_unverified():
    graded = grade_one(make_case(), make_run(final_text="Revenue is up."), None)
    assert graded.status is GradeStatus.PASSED
    assert graded.verified is False
    assert graded.message == "no verification: the test has no check"
    assert graded.outcome().verified is False


def judge_by_purpose(reply_ok: bool = True):
    """A judge answering evaluators with a verdict, extraction with the SQL that holds the answer."""

    def step(request: RecordedRequest, _index: int) -> Step:
        system = request.messages[0]["content"]
        if "grade replies" in system:
            return answer(json.dumps({"passed": reply_ok, "reasoning": "judged"}))
        if "turns the results" in system or "into the table" in system:
            return answer("```sql\nSELECT region, revenue FROM q1\n```")
        return error(418, f"unexpected request: {system[:60]}")

    return step


MULTI_CHECK = {
    "sql": BY_REGION,
    "assertions": (ToolCallAssertion("execute_sql", args={"sql_query": BY_REGION}),),
    "evaluators": (Evaluator("names_the_leader", "Says which region leads"),),
}


def sql_call(sql: str = BY_REGION) -> ToolCallRecord:
    return ToolCallRecord("c1", "execute_sql", {"sql_query": sql}, json.dumps({"sql_query": sql}))


def test_data_assertions_and_evaluators_must_all_pass(warehouse, judge_server):
    case = make_case(**MULTI_CHECK)
    reference = reference_for(case, warehouse)
    right = [[region, value] for region, value in EXPECTED.items()]

    def grade_with_judge(run: AgentRun) -> Grade:
        return with_judge(
            judge_server,
            lambda model: Grader(judge_model=model).grade_run(case, run, reference),
        )

    judge_server.set_script(judge_by_purpose(reply_ok=True))
    passed = grade_with_judge(make_run(answer_rows=right, tool_calls=[sql_call()]))
    assert passed.status is GradeStatus.PASSED
    assert passed.message == "all 3 checks passed"
    assert [c.kind for c in passed.checks] == ["data", "assertions", "evaluators"]
    evaluator_request = judge_server.last
    assert "North leads with 250.50." in evaluator_request.messages[1]["content"]

    no_call = grade_with_judge(make_run(answer_rows=right, tool_calls=[]))
    assert no_call.status is GradeStatus.FAILED
    assert no_call.message == "expected execute_sql with the expected arguments at least 1x, got 0"

    wrong = [["north", 250.5], ["south", 0.0], ["west", 40.0]]
    asked = len(judge_server.requests)
    wrong_data = grade_with_judge(make_run(answer_rows=wrong, tool_calls=[sql_call()]))
    assert wrong_data.status is GradeStatus.FAILED
    # The data check failed it: the judge is not asked about the reply.
    assert [c.status for c in wrong_data.checks] == [
        GradeStatus.FAILED,
        GradeStatus.PASSED,
        GradeStatus.SKIPPED,
    ]
    assert len(judge_server.requests) == asked
    judged_anyway = with_judge(
        judge_server,
        lambda model: Grader(judge_model=model, judge_failed_runs=True).grade_run(
            case, make_run(answer_rows=wrong, tool_calls=[sql_call()]), reference
        ),
    )
    assert [c.status for c in judged_anyway.checks][2] is GradeStatus.PASSED
    assert judged_anyway.status is GradeStatus.FAILED

    judge_server.set_script(judge_by_purpose(reply_ok=False))
    bad_reply = grade_with_judge(make_run(answer_rows=right, tool_calls=[sql_call()]))
    assert bad_reply.status is GradeStatus.FAILED
    assert bad_reply.message == "evaluator 'names_the_leader' failed: judged"


def test_a_failed_check_outranks_a_judge_outage(warehouse, judge_server):
    case = make_case(**MULTI_CHECK)
    reference = reference_for(case, warehouse)
    judge_server.set_script(repeat(error(503, "judge overloaded")))
    run = make_run(answer_rows=[["north", 1.0]], tool_calls=[sql_call()])

    graded = with_judge(
        judge_server,
        lambda model: Grader(judge_model=model, judge_failed_runs=True).grade_run(
            case, run, reference
        ),
    )
    statuses = {c.kind: c.status for c in graded.checks}
    assert statuses["evaluators"] is GradeStatus.ERROR
    assert statuses["data"] is GradeStatus.FAILED
    assert graded.status is GradeStatus.FAILED
    assert graded.message == graded.checks[0].message  # the known failure, not the outage

    # with the data right, the outage is what decides: an error, not a pass
    right = make_run(answer_rows=[[r, v] for r, v in EXPECTED.items()], tool_calls=[sql_call()])
    undecided = with_judge(
        judge_server, lambda model: Grader(judge_model=model).grade_run(case, right, reference)
    )
    assert undecided.status is GradeStatus.ERROR
    assert "judge openai:gpt-4.1 unavailable" in undecided.message


def test_consistency_is_judged_once_across_the_runs_of_a_case(judge_server):
    case = make_case(consistency=Consistency(n=3))
    runs = [
        make_run(final_text="North leads with $250.50.", attempt=0),
        make_run(final_text="The leading region is north (250.5).", attempt=1),
        make_run(status=RunStatus.ERROR, error="agent timed out", attempt=2),
        make_run(final_text="North: 250.50 USD.", attempt=3),
    ]
    judge_server.set_script(repeat(answer("Same figure.\nAnswer: A")))
    grades = with_judge(
        judge_server, lambda model: Grader(judge_model=model).grade_case(case, runs)
    )

    assert len(judge_server.requests) == 3  # 3 completed runs: 3 pairs, judged once
    assert [g.status for g in grades] == [
        GradeStatus.PASSED,
        GradeStatus.PASSED,
        GradeStatus.ERROR,
        GradeStatus.PASSED,
    ]
    consistency = grades[0].checks[0]
    assert consistency.kind == "consistency" and consistency.details["accuracy"] == 1.0
    assert consistency.details["scores"] == {"0": 2, "1": 2, "3": 2}
    assert grades[2].message == "agent timed out"


# ---- caching ---------------------------------------------------------------------------------


def test_judge_and_extraction_answers_are_cached_across_gradings_and_processes(
    warehouse, judge_server, tmp_path
):
    case = make_case(
        sql=BY_REGION, evaluators=(Evaluator("names_the_leader", "Says which region leads"),)
    )
    reference = reference_for(case, warehouse)
    queries = [
        QueryRecord(
            "q1",
            BY_REGION,
            ["region", "revenue"],
            ["VARCHAR", "DECIMAL(38,2)"],
            [["north", 250.5], ["south", 100.004], ["west", 40.0]],  # south is 0.014 off
            3,
        )
    ]
    runs = [
        make_run(queries=queries, attempt=0, final_text="North leads with 250.50."),
        make_run(queries=queries, attempt=1, final_text="North is first: $250.50."),
    ]
    judge_server.set_script(judge_by_purpose(reply_ok=True))
    layout = StateFolder(tmp_path / ".eval")
    cache = FileCompletionCache(layout)

    def grade_all(cache_now, tolerance: Tolerance | None = None):
        return with_judge(
            judge_server,
            lambda model: Grader(judge_model=model, tolerance=tolerance).grade_case(
                case, runs, reference
            ),
            cache=cache_now,
        )

    first = grade_all(cache)
    assert [g.status for g in first] == [GradeStatus.FAILED, GradeStatus.FAILED]
    # per run one extraction; the data check failed it, so no evaluator is asked
    assert len(judge_server.requests) == 2
    assert len(cache) == 2

    second = grade_all(cache)
    assert [g.to_row()["checks"] for g in second] == [g.to_row()["checks"] for g in first]
    assert len(judge_server.requests) == 2

    # another process: a new cache over the same folder answers from what the first wrote,
    # so regrading with a looser tolerance changes the verdict with no extraction asked
    # again (only the evaluators, now that the data passes)
    reopened = FileCompletionCache(StateFolder(tmp_path / ".eval"))
    assert len(reopened) == 2
    third = grade_all(reopened, tolerance=Tolerance(decimals=2, atol=0.02))
    assert [g.status for g in third] == [GradeStatus.PASSED, GradeStatus.PASSED]
    assert len(judge_server.requests) == 4
    again = grade_all(reopened, tolerance=Tolerance(decimals=2, atol=0.02))
    assert [g.status for g in again] == [GradeStatus.PASSED, GradeStatus.PASSED]
    assert len(judge_server.requests) == 4


_CELLS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**127), 2**127)
    | st.text(max_size=5)
    | st.floats()
    | st.dates()
)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.lists(_CELLS, min_size=3, max_size=3), max_size=4),
    names=st.permutations(["a", "b", "A"]),
    width=st.integers(0, 3),
)
def test_the_rows_a_grade_keeps_to_read_are_what_pandas_writes(rows, names, width) -> None:
    # A grade's expected_data and actual_data: pandas' JSON of the rows, frame or no frame.
    columns, rows = names[:width], [row[:width] for row in rows]
    frame = frame_from_rows(columns, rows)
    written = json.loads(frame.to_json(orient="records", date_format="iso", default_handler=str))
    assert preview_records(columns, rows) == (written if rows else [])


def test_a_reference_naming_two_columns_alike_is_graded_and_both_are_kept_to_read(warehouse):
    # DuckDB keeps both names `region`; a preview keyed by name must not lose (or crash on) one
    sql = "SELECT region, region, SUM(amount) AS revenue FROM orders GROUP BY region"
    case = make_case(sql=sql)
    wrong = make_run(answer_rows=[["north", "north", 1.0]], columns=("region", "region", "revenue"))
    graded = grade_one(case, wrong, reference_for(case, warehouse))

    assert graded.status is GradeStatus.FAILED
    [check] = graded.checks
    assert {"region": "west", "region_1": "west", "revenue": 40.0} in check.details["expected_data"]
    assert check.details["actual_data"] == [
        {"region": "north", "region_1": "north", "revenue": 1.0}
    ]
    assert {row["_side"] for row in check.details["diff"]} == {"actual only", "expected only"}

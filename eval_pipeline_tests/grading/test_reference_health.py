"""Reference health: each warning on a reference made for it, none on a clean one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from eval_pipeline.grading import (
    ReferenceResult,
    any_may_vary_within_day,
    drift_warning,
    may_vary_within_day,
    reference_health,
)
from eval_pipeline.sandbox import SqlSandbox

CLEAN = "SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region ORDER BY region"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SqlSandbox]:
    def setup(connection) -> None:
        connection.execute(
            "CREATE TABLE orders AS SELECT * FROM (VALUES "
            "(1, 'EU', 10.0, DATE '2026-01-05'), (2, 'EU', 30.0, DATE '2026-01-06'), "
            "(3, 'US', 30.0, DATE '2026-01-07'), (4, 'US', 10.0, DATE '2026-01-08'), "
            "(5, 'APAC', 5.0, DATE '2026-01-09')) AS t(id, region, amount, order_date)"
        )
        connection.execute("CREATE MACRO my_macro(x) AS x + 1")  # the warehouse's own

    with SqlSandbox.in_memory(setup) as box:
        yield box


def _reference(sandbox: SqlSandbox, sql: str) -> ReferenceResult:
    result = sandbox.execute(sql)
    return ReferenceResult("t", sql, list(result.columns), [list(r) for r in result.rows])


def _kinds(sandbox: SqlSandbox, sql: str) -> dict[str, str]:
    return {w.kind: w.message for w in reference_health(_reference(sandbox, sql), sandbox.execute)}


def test_a_clean_reference_has_no_warning(sandbox: SqlSandbox) -> None:
    assert _kinds(sandbox, CLEAN) == {}
    # a LIMIT whose boundary is no tie is clean too
    assert _kinds(sandbox, "SELECT id FROM orders ORDER BY amount DESC, id LIMIT 2") == {}
    assert _kinds(sandbox, "SELECT id FROM orders ORDER BY amount DESC LIMIT 2") == {}


def test_no_rows(sandbox: SqlSandbox) -> None:
    warnings = _kinds(sandbox, "SELECT id FROM orders WHERE order_date > DATE '2027-01-01'")
    assert list(warnings) == ["no_rows"]
    assert "any empty answer passes" in warnings["no_rows"]


def test_limit_through_a_tie(sandbox: SqlSandbox) -> None:
    # the two largest amounts are both 30: LIMIT 1 picks one of them
    warnings = _kinds(sandbox, "SELECT id, amount FROM orders ORDER BY amount DESC LIMIT 1")
    assert list(warnings) == ["ties_at_limit"]
    assert "rows 1 and 2 both have amount = 30.0" in warnings["ties_at_limit"]


def test_limit_through_a_tie_on_an_aggregate_named_by_alias(sandbox: SqlSandbox) -> None:
    # EU and US both total 40
    sql = "SELECT region, SUM(amount) AS total FROM orders GROUP BY 1 ORDER BY total DESC LIMIT 1"
    warnings = _kinds(sandbox, sql)
    assert list(warnings) == ["ties_at_limit"]
    assert "total = 40.0" in warnings["ties_at_limit"]


def test_two_runs_that_disagree(sandbox: SqlSandbox) -> None:
    # Every row with a fresh random UUID: never empty, and the second run differs from the
    # first in every row. (A filter like `random() < 0.5` over five rows returned none one run
    # in 32, which added a `no_rows` warning, and the same rows as often, so no disagreement.)
    warnings = _kinds(sandbox, "SELECT id, uuid() AS token FROM orders")
    assert list(warnings) == ["nondeterministic"]
    assert (
        "two runs of the reference disagree: column 'token' differs"
        in (warnings["nondeterministic"])
    )


def test_limit_without_order_is_noted_as_nondeterministic(sandbox: SqlSandbox) -> None:
    warnings = _kinds(sandbox, "SELECT id FROM orders LIMIT 2")
    assert list(warnings) == ["nondeterministic"]
    assert "LIMIT rows without ORDER BY" in warnings["nondeterministic"]


@pytest.mark.parametrize(
    "expression",
    [
        "CURRENT_DATE",
        "current_date - INTERVAL 30 DAY",
        "today()",
        "now()",
        "get_current_timestamp()",
    ],
)
def test_reads_the_current_date(sandbox: SqlSandbox, expression: str) -> None:
    sql = f"SELECT COUNT(*) AS n FROM orders WHERE order_date < {expression}"
    warnings = _kinds(sandbox, sql)
    assert list(warnings) == ["current_date"]
    assert "moves from day to day" in warnings["current_date"]
    assert "Not an error" in warnings["current_date"]


def test_a_date_in_a_string_or_column_name_is_not_the_current_date(sandbox: SqlSandbox) -> None:
    sql = "SELECT 'current_date' AS now, order_date AS today FROM orders ORDER BY id"
    assert _kinds(sandbox, sql) == {}


def test_drift_when_the_answer_moved_but_the_test_did_not(sandbox: SqlSandbox) -> None:
    yesterday = ReferenceResult("t", CLEAN, ["region", "revenue"], [["EU", 40.0], ["US", 50.0]])
    today = _reference(sandbox, CLEAN)
    warnings = reference_health(
        today, sandbox.execute, previous=yesterday, previous_test_hash="h1", test_hash="h1"
    )
    assert [w.kind for w in warnings] == ["drift"]
    assert "changed since the previous day (2 rows then, 3 rows now)" in warnings[0].message
    assert warnings[0].to_row()["kind"] == "drift"
    # an edited test is expected to change its answer; an unchanged answer is no drift
    assert drift_warning(yesterday, today, previous_test_hash="h0", test_hash="h1") is None
    assert drift_warning(today, today, previous_test_hash="h1", test_hash="h1") is None


def test_a_failing_reference_gets_no_warning(sandbox: SqlSandbox) -> None:
    failed = ReferenceResult("t", "SELECT nope FROM orders", error="the reference SQL failed")
    assert reference_health(failed, sandbox.execute) == []


def test_the_same_groups_in_another_order_are_the_same_answer_unless_the_sql_orders_them() -> None:
    # DuckDB returns GROUP BY groups in any order from one run to the next (the sample suite's
    # revenue_by_region_this_year did, one run in six): without ORDER BY that is no new answer,
    # no drift and no new data version to regrade every model against.
    unordered = "SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region"
    rows = [["EU", 40.0], ["US", 40.0], ["APAC", 5.0], [None, 1.0]]
    one = ReferenceResult("t", unordered, ["region", "revenue"], rows)
    other = ReferenceResult("t", unordered, ["region", "revenue"], rows[::-1])
    assert one.result_hash == other.result_hash and one.data_version == other.data_version
    assert drift_warning(one, other, previous_test_hash="h1", test_hash="h1") is None
    # with ORDER BY the order is part of the answer
    ordered = ReferenceResult("t", CLEAN, ["region", "revenue"], rows)
    reordered = ReferenceResult("t", CLEAN, ["region", "revenue"], rows[::-1])
    assert ordered.result_hash != reordered.result_hash
    # and other rows are another answer either way
    changed = ReferenceResult("t", unordered, ["region", "revenue"], [["EU", 41.0], *rows[1:]])
    assert changed.result_hash != one.result_hash


VARYING = [
    "SELECT count(*) FROM orders WHERE order_date = current_date",
    "SELECT now() - INTERVAL 1 DAY",
    "SELECT current_localtime()",
    'SELECT "now"()',
    "SELECT age(order_date) FROM orders",
    "SELECT random() < 0.5",
    "SELECT uuid()",
    "SELECT CURRENT_TIMESTAMP",
    "SELECT current_setting('TimeZone')",
    "SELECT today(",  # does not parse: cannot be classified
    "SELECT * FROM range(3)",  # a table function: no stability declared
    "SELECT my_macro(1)",  # not in the engine's catalogue
]


@pytest.mark.parametrize("sql", VARYING)
def test_a_query_may_vary_by_any_function_the_engine_does_not_declare_consistent(sql) -> None:
    assert may_vary_within_day(sql)


CONSISTENT = [
    "-- today is 2026-06-30\nSELECT DATE '2026-06-30' AS today",
    "SELECT 1 FROM nowhere",
    "SELECT date_trunc('month', order_date) AS m, sum(amount) - 1 FROM orders GROUP BY 1",
    "SELECT strftime(order_date, '%Y') AS y, round(avg(amount), 2) FROM orders GROUP BY y",
    "SELECT region, lag(revenue) OVER (ORDER BY region) FROM sales",
]


@pytest.mark.parametrize("sql", CONSISTENT)
def test_a_query_of_consistent_functions_stays_the_same_within_a_day(sql) -> None:
    assert not may_vary_within_day(sql)


@pytest.mark.parametrize("varying", VARYING)
def test_queries_judged_together_keep_the_verdict_each_has_alone(varying) -> None:
    # A suite's references are judged in one statement: one query that varies (or does not
    # parse) among them is found, and does not make the others vary. (A comment makes each
    # text new, so no verdict comes from an earlier test.)
    consistent = [f"{sql}\n-- beside {varying}" for sql in CONSISTENT]
    assert any_may_vary_within_day([*consistent, varying, *consistent])
    assert not any(may_vary_within_day(sql) for sql in consistent)
    assert not any_may_vary_within_day(consistent)


def test_text_the_engine_cannot_take_varies_and_leaves_the_others_alone() -> None:
    # A lone surrogate cannot reach DuckDB: that query cannot be classified, the rest can.
    broken = "SELECT '\ud800' AS x"
    consistent = [f"{sql}\n-- beside a broken one" for sql in CONSISTENT]
    assert any_may_vary_within_day([*consistent, broken])
    assert may_vary_within_day(broken)
    assert not any_may_vary_within_day(consistent)


def _runs_again(sandbox: SqlSandbox, sql: str) -> tuple[int, dict[str, str]]:
    """How many more times the checks ran the reference SQL itself, when every run after the
    first answers otherwise (a warehouse whose rows move), and the warnings."""
    runs = []

    def moving(query: str):
        runs.append(query)
        result = sandbox.execute(query)
        rows = [] if query == sql else result.rows
        return replace(result, rows=rows, row_count=len(rows))

    reference = _reference(sandbox, sql)
    warnings = {w.kind: w.message for w in reference_health(reference, moving)}
    return runs.count(sql), warnings


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region",
        "SELECT count(*) AS n, max(order_date) FROM orders WHERE region <> 'EU'",
        "SELECT DISTINCT region FROM orders UNION SELECT 'none'",
    ],
)
def test_a_reference_that_cannot_return_other_rows_is_run_once(sandbox: SqlSandbox, sql) -> None:
    assert _runs_again(sandbox, sql) == (0, {})


@pytest.mark.parametrize(
    "sql",
    [
        CLEAN,  # ORDER BY: ties may come out in another order
        "SELECT region, any_value(id) FROM orders GROUP BY region",
        "SELECT string_agg(region, ',') FROM orders",
        "SELECT id, row_number() OVER (PARTITION BY region) FROM orders",
        "SELECT region FROM (SELECT region FROM orders LIMIT 3)",
        "SELECT DISTINCT ON (region) region, id FROM orders",
        "SELECT my_macro(1)",
    ],
)
def test_a_reference_that_may_return_other_rows_is_run_again_and_warned(
    sandbox: SqlSandbox, sql
) -> None:
    again, warnings = _runs_again(sandbox, sql)
    assert again == 1
    assert "nondeterministic" in warnings

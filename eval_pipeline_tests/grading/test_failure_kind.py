"""Failure kinds: each kind of miss on a case made for it, and equivalent rewrites as same SQL."""

from __future__ import annotations

import pytest

from eval_pipeline.grading import FailureKind, classify_failure

REFERENCE = """
    SELECT c.region, SUM(o.amount) AS revenue
    FROM orders AS o JOIN customers AS c ON o.customer_id = c.customer_id
    WHERE o.status <> 'cancelled'
    GROUP BY c.region
"""


@pytest.mark.parametrize(
    ("agent_sql", "kind", "detail"),
    [
        ("SELEC region FRM orders", FailureKind.UNPARSEABLE, "the agent's SQL does not parse"),
        ("SELECT 'EU' AS region, 1234.5 AS revenue", FailureKind.TABLES, "reads no table"),
        (
            "SELECT region, SUM(amount) AS revenue FROM orders_wide "
            "WHERE status <> 'cancelled' GROUP BY region",
            FailureKind.TABLES,
            "reads orders_wide; the reference reads customers, orders",
        ),
        (
            "SELECT c.region, SUM(o.amount) AS revenue FROM orders o "
            "LEFT JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' GROUP BY c.region",
            FailureKind.JOIN,
            "LEFT JOIN customers",
        ),
        (
            "SELECT c.region, SUM(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.region",
            FailureKind.FILTER,
            "misses the filter status <> 'cancelled'",
        ),
        (
            "SELECT c.region, SUM(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' AND o.amount > 0 GROUP BY c.region",
            FailureKind.FILTER,
            "adds the filter amount > 0",
        ),
        (
            "SELECT c.region, SUM(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' GROUP BY c.region HAVING SUM(o.amount) > 10",
            FailureKind.FILTER,
            "adds the filter SUM(amount) > 10",
        ),
        (
            "SELECT c.country, SUM(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' GROUP BY c.country",
            FailureKind.GRAIN,
            "the reference groups by region",
        ),
        (
            "SELECT c.region, AVG(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' GROUP BY c.region",
            FailureKind.AGGREGATION,
            "misses the aggregate SUM(amount) and has the aggregate AVG(amount)",
        ),
        (
            "SELECT c.region, SUM(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer_id = c.customer_id "
            "WHERE o.status <> 'cancelled' GROUP BY c.region ORDER BY revenue DESC LIMIT 3",
            FailureKind.ORDER_LIMIT,
            "adds the ORDER/LIMIT ORDER BY SUM(amount) DESC, LIMIT 3",
        ),
    ],
)
def test_each_kind_of_miss_is_named(agent_sql: str, kind: FailureKind, detail: str) -> None:
    reason = classify_failure(agent_sql, REFERENCE)
    assert reason.kind is kind, reason
    assert detail in reason.detail


def test_other_selected_columns_are_a_columns_miss() -> None:
    reason = classify_failure(
        "SELECT customer_id FROM orders WHERE status = 'paid'",
        "SELECT order_id FROM orders WHERE status = 'paid'",
    )
    assert reason.kind is FailureKind.COLUMNS
    assert "misses the column order_id" in reason.detail


def test_an_unparseable_reference_is_named_as_such() -> None:
    reason = classify_failure("SELECT 1", "SELECT FROM WHERE (")
    assert reason.kind is FailureKind.UNPARSEABLE
    assert "reference SQL does not parse" in reason.detail


@pytest.mark.parametrize(
    "agent_sql",
    [
        # other aliases, GROUP BY 1, USING for ON, the other join order, != for <>
        "SELECT cu.region, SUM(ord.amount) AS total FROM customers cu "
        "JOIN orders ord USING (customer_id) WHERE ord.status != 'cancelled' GROUP BY 1",
        # upper-case names, the comparison written the other way round, GROUP BY an alias
        "SELECT C.REGION AS r, SUM(O.AMOUNT) AS revenue FROM ORDERS O "
        "JOIN CUSTOMERS C ON C.CUSTOMER_ID = O.CUSTOMER_ID WHERE 'cancelled' <> O.STATUS "
        "GROUP BY r",
    ],
)
def test_equivalent_rewrites_are_the_same_sql(agent_sql: str) -> None:
    assert classify_failure(agent_sql, REFERENCE).kind is FailureKind.SAME_SQL


def test_count_of_a_column_is_another_aggregation_than_count_star() -> None:
    # Equal on a column without NULLs, but only the data can tell: not the same SQL.
    reason = classify_failure(
        "SELECT COUNT(customer_id) FROM orders", "SELECT COUNT(*) FROM orders"
    )
    assert reason.kind is FailureKind.AGGREGATION
    assert "COUNT(customer_id)" in reason.detail


def test_ctes_are_looked_into_and_their_names_are_not_tables() -> None:
    reason = classify_failure(
        "WITH paid AS (SELECT * FROM orders) SELECT COUNT(*) FROM paid",
        "WITH paid AS (SELECT * FROM orders WHERE status = 'paid') SELECT COUNT(*) FROM paid",
    )
    assert reason.kind is FailureKind.FILTER
    assert "status = 'paid'" in reason.detail

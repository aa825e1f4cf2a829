"""The semantic check: coincidental matches fail on a variant, equivalent rewrites pass on all."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from eval_pipeline.grading import build_variants, compare_results, frame_from_rows, semantic_check
from eval_pipeline.sandbox import SqlSandbox
from eval_pipeline_tests.grading.small_shop import build_shop

COUNT = "SELECT COUNT(*) AS orders FROM orders"
REVENUE_BY_REGION = """
    SELECT c.region, SUM(o.amount) AS revenue
    FROM orders AS o JOIN customers AS c ON o.customer_id = c.id
    WHERE o.status <> 'cancelled'
    GROUP BY c.region
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqlSandbox, list[SqlSandbox]]]:
    folder = tmp_path_factory.mktemp("semantic")
    warehouse = build_shop(folder / "shop.duckdb")
    variants = build_variants(warehouse, folder / "variants", count=8, seed=0)
    base = SqlSandbox.for_file(warehouse)
    sandboxes = variants.open()
    yield base, sandboxes
    for sandbox in [base, *sandboxes]:
        sandbox.close()


def _matches_on_the_warehouse(base: SqlSandbox, agent_sql: str, reference_sql: str) -> bool:
    actual, expected = base.execute(agent_sql), base.execute(reference_sql)
    return compare_results(
        frame_from_rows(actual.columns, [list(r) for r in actual.rows]),
        frame_from_rows(expected.columns, [list(r) for r in expected.rows]),
    ).passed


@pytest.mark.parametrize(
    "agent_sql",
    [
        "SELECT 400 AS orders",  # the number read off the warehouse, hard-coded
        "SELECT MAX(id) AS orders FROM orders",  # ids run 1..n there, so max(id) = count(*)
    ],
    ids=["literal", "max-id"],
)
def test_a_coincidental_match_fails_on_a_variant(shop, agent_sql: str) -> None:
    base, variants = shop
    assert _matches_on_the_warehouse(base, agent_sql, COUNT)
    check = semantic_check(COUNT, agent_sql, variants, compare_results)
    assert not check.passed and check.status == "failed"
    assert check.variant == 1
    assert check.message.startswith("matches on the warehouse but not on variant 1: ")
    assert "orders" in check.message  # the first difference, from compare_results


@pytest.mark.parametrize(
    ("agent_sql", "reference_sql"),
    [
        (  # another join order, other aliases, GROUP BY 1
            "SELECT cu.region, SUM(od.amount) AS revenue FROM customers cu "
            "JOIN orders od ON cu.id = od.customer_id WHERE od.status != 'cancelled' GROUP BY 1",
            REVENUE_BY_REGION,
        ),
        # COUNT of a column without NULLs (NOT NULL, and a key reference)
        ("SELECT COUNT(status) AS orders FROM orders", COUNT),
        ("SELECT COUNT(customer_id) AS orders FROM orders", COUNT),
        # a view for its definition
        (
            "SELECT COUNT(*) AS n FROM paid_orders",
            "SELECT COUNT(*) AS n FROM orders WHERE status <> 'cancelled'",
        ),
        # an ordered top-n written with a subquery
        (
            "SELECT name FROM (SELECT c.name, SUM(o.amount) AS s FROM orders o JOIN customers c "
            "ON c.id = o.customer_id GROUP BY c.id, c.name) ORDER BY s DESC, name LIMIT 5",
            "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            "GROUP BY c.id, c.name ORDER BY SUM(o.amount) DESC, c.name LIMIT 5",
        ),
    ],
    ids=["join-order-group-by-1", "count-not-null", "count-key", "view", "top-n"],
)
def test_an_equivalent_rewrite_passes_on_every_variant(
    shop, agent_sql: str, reference_sql: str
) -> None:
    _, variants = shop
    check = semantic_check(reference_sql, agent_sql, variants, partial(compare_results))
    assert check.passed and check.status == "passed", check.message
    assert check.message == "agrees on all 8 variants"


def test_an_agent_query_failing_on_a_variant_fails_the_check(shop) -> None:
    base, variants = shop
    # fine while every order id is at most 400; duplicated rows get ids past it
    agent_sql = (
        "SELECT COUNT(*) AS orders FROM orders "
        "WHERE CAST(CASE WHEN id > 400 THEN 'x' ELSE '1' END AS INTEGER) = 1"
    )
    assert base.execute(agent_sql).rows == [(400,)]
    check = semantic_check(COUNT, agent_sql, variants)
    assert check.status == "failed" and check.variant == 1
    assert "on variant 1: the agent's SQL fails there: Conversion Error" in check.message


def test_without_agent_sql_the_check_is_skipped_with_the_reason(shop) -> None:
    _, variants = shop
    check = semantic_check(COUNT, None, variants)
    assert check.status == "skipped" and check.passed
    assert check.message == "skipped: the agent sent no SQL to re-run"


def test_a_variant_where_the_reference_fails_is_left_out_and_said(shop) -> None:
    _, variants = shop
    reference = (
        "SELECT CAST(CASE WHEN MAX(id) > 400 THEN 'x' ELSE '1' END AS INTEGER) AS n FROM orders"
    )
    check = semantic_check(reference, "SELECT 1 AS n", variants)
    assert check.status == "skipped"
    assert "the reference SQL fails there" in check.message

"""The same tests give the same verdicts on DuckDB, PostgreSQL and MariaDB copies of one warehouse."""

from __future__ import annotations

import pytest

from eval_pipeline.grading import compare_results, frame_from_rows
from eval_pipeline.sandbox import ServerSandbox, SqlSandbox
from eval_pipeline_tests.warehouses.conftest import database_of

# (reference SQL, an agent's SQL, whether the agent's answer should pass)
CASES = [
    (
        "SELECT SUM(amount) AS revenue FROM orders",
        "SELECT ROUND(SUM(amount), 2) AS total FROM orders",
        True,
    ),
    (
        "SELECT CAST(ordered_at AS DATE) AS day, COUNT(*) AS orders FROM orders "
        "GROUP BY CAST(ordered_at AS DATE) ORDER BY day",
        "SELECT CAST(paid_at AS DATE) AS day, COUNT(*) AS orders FROM orders "
        "GROUP BY CAST(paid_at AS DATE) ORDER BY day",
        False,
    ),
    (
        "SELECT c.name, SUM(o.amount) AS spent FROM customers AS c "
        "LEFT JOIN orders AS o ON o.customer_id = c.id GROUP BY c.name",
        "SELECT c.name, SUM(o.amount) AS spent FROM customers AS c "
        "JOIN orders AS o ON o.customer_id = c.id GROUP BY c.name",
        True,  # every customer has an order: the join kinds agree here
    ),
    (
        "SELECT id, ordered_at, paid_at FROM orders WHERE status IS NULL",
        "SELECT id, ordered_at, paid_at FROM orders WHERE status = 'open'",
        False,
    ),
    (
        "SELECT id, signup_date, credit_limit FROM customers ORDER BY signup_date",
        "SELECT id, signup_date, credit_limit FROM customers ORDER BY signup_date",
        True,
    ),
    (
        "SELECT AVG(amount) AS avg_amount, COUNT(paid_at) AS paid FROM orders",
        "SELECT AVG(amount) AS avg_amount, COUNT(*) AS paid FROM orders",
        False,
    ),
]


def _frames(sandbox, sql_pairs):
    return [
        (
            frame_from_rows(*_columns_rows(sandbox, reference)),
            frame_from_rows(*_columns_rows(sandbox, agent)),
        )
        for reference, agent in sql_pairs
    ]


def _columns_rows(sandbox, sql):
    result = sandbox.execute(sql)
    return result.columns, [list(row) for row in result.rows]


@pytest.fixture(scope="module")
def results_by_engine(duckdb_warehouse, postgres, mariadb):
    pairs = [(reference, agent) for reference, agent, _ in CASES]
    found = {}
    with SqlSandbox.for_file(duckdb_warehouse) as sandbox:
        found["duckdb"] = _frames(sandbox, pairs)
    for name, server in (("postgres", postgres), ("mariadb", mariadb)):
        with ServerSandbox(database_of(server)) as sandbox:
            found[name] = _frames(sandbox, pairs)
    return found


@pytest.mark.parametrize("engine", ["duckdb", "postgres", "mariadb"])
def test_each_engine_gives_the_expected_verdicts(results_by_engine, engine):
    verdicts = [
        compare_results(agent, reference, ordered="ORDER BY" in sql).passed
        for (reference, agent), (sql, _, _) in zip(results_by_engine[engine], CASES, strict=True)
    ]
    assert verdicts == [expected for _, _, expected in CASES]


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_a_server_reference_equals_the_duckdb_reference(results_by_engine, engine):
    for i, ((server_reference, _), (duck_reference, _)) in enumerate(
        zip(results_by_engine[engine], results_by_engine["duckdb"], strict=True)
    ):
        comparison = compare_results(server_reference, duck_reference)
        assert comparison.passed, (CASES[i][0], comparison.message)

"""The bundled sample suite: its dbt project builds, and every reference query means what it says.

The warehouse is built once per test run into a temporary folder (the `sample_warehouse` fixture
of eval_pipeline_tests/conftest.py), so the repository stays clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

pytestmark = pytest.mark.slow

SUITE_DIR = Path(__file__).resolve().parents[2] / "tests_suite"
DBT_DIR = SUITE_DIR / "dbt"
CASES_DIR = SUITE_DIR / "cases"
EMPTY_ANSWER_TAG = "empty-answer"


def _load_cases() -> list[tuple[str, dict]]:
    """Every test file under cases/ (outputs/ excluded), as (path relative to cases/, content)."""
    cases = []
    for path in sorted([*CASES_DIR.rglob("*.yml"), *CASES_DIR.rglob("*.yaml")]):
        if "outputs" in path.relative_to(CASES_DIR).parts:
            continue
        cases.append((path.relative_to(CASES_DIR).as_posix(), yaml.safe_load(path.read_text())))
    return cases


CASES = _load_cases()
SQL_CASES = [pytest.param(case, id=rel) for rel, case in CASES if case.get("sql")]


# Module scope: DuckDB allows one configuration per file in a process, and the sandbox tests
# that share this worker open the same file with theirs once this module is done.
@pytest.fixture(scope="module")
def warehouse(sample_warehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    """The sample warehouse (built once per test run by the shared `sample_warehouse` fixture
    of eval_pipeline_tests/conftest.py), opened read-only."""
    connection = duckdb.connect(str(sample_warehouse.path), read_only=True)
    yield connection
    connection.close()


def _rows(connection: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return connection.sql(sql).fetchall()


def _scalar(connection: duckdb.DuckDBPyConnection, sql: str):
    return _rows(connection, sql)[0][0]


@pytest.mark.parametrize("case", SQL_CASES)
def test_reference_sql_returns_what_the_case_means(warehouse, case):
    rows = _rows(warehouse, case["sql"])
    if EMPTY_ANSWER_TAG in case.get("tags", []):
        assert rows == [], "an empty-answer case must return no rows"
    else:
        assert rows, "the reference query returned no rows; tag the case empty-answer if meant"


def test_suite_has_an_empty_answer_case_and_enough_cases():
    assert len(CASES) >= 32
    assert any(EMPTY_ANSWER_TAG in case.get("tags", []) and case.get("sql") for _, case in CASES)


def test_warehouse_has_the_traps_the_cases_rely_on(warehouse):
    assert _scalar(warehouse, "SELECT COUNT(*) FROM orders") >= 50_000
    assert (
        _scalar(
            warehouse,
            "SELECT COUNT(*) FROM customers AS c "
            "WHERE NOT EXISTS (SELECT 1 FROM orders AS o WHERE o.customer_id = c.customer_id)",
        )
        > 0
    )
    assert _scalar(warehouse, "SELECT COUNT(*) FROM customers WHERE region IS NULL") > 0
    assert _scalar(warehouse, "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'") > 0
    assert _scalar(warehouse, "SELECT COUNT(*) FROM orders WHERE is_test_order") > 0
    statuses = {row[0] for row in _rows(warehouse, "SELECT DISTINCT status FROM orders")}
    assert statuses == {"placed", "shipped", "delivered", "cancelled", "returned"}
    refunds = _rows(
        warehouse,
        "SELECT COUNT(*) FILTER (WHERE refunded_usd = order_amount_usd), "
        "COUNT(*) FILTER (WHERE refunded_usd > 0 AND refunded_usd < order_amount_usd) FROM orders",
    )[0]
    assert refunds[0] > 0 and refunds[1] > 0, "expected both full and partial refunds"
    assert _scalar(warehouse, "SELECT COUNT(*) FROM orders WHERE discount_usd > 0") > 0
    assert _scalar(warehouse, "SELECT as_of_date FROM reporting_date").isoformat() == "2026-06-30"
    assert _scalar(warehouse, "SELECT MAX(order_date) FROM orders").isoformat() == "2026-06-30"


def test_every_mart_column_is_described(warehouse):
    schema = yaml.safe_load((DBT_DIR / "models" / "marts" / "schema.yml").read_text())
    described = {
        model["name"]: {
            column["name"] for column in model.get("columns", []) if column.get("description")
        }
        for model in schema["models"]
        if model.get("description")
    }
    tables = _rows(
        warehouse,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'main'",
    )
    missing = sorted(
        f"{table}.{column}" for table, column in tables if column not in described.get(table, set())
    )
    assert missing == [], f"mart columns without a description in schema.yml: {missing}"


def test_the_warehouse_builds_through_dagster_with_every_mart(sample_warehouse):
    """The build the fixture ran is Dagster's `build_warehouse` job: every mart the agent
    queries was recorded as a materialization of its `warehouse/...` asset."""
    for mart in (
        "customers",
        "products",
        "orders",
        "order_items",
        "payments",
        "refunds",
        "marketing_channels",
    ):
        assert f"warehouse/{mart}" in sample_warehouse.materialized
    assert sample_warehouse.path.exists()

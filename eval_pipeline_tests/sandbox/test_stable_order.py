"""What the agent reads of a query whose order is open is the same from run to run."""

from __future__ import annotations

from eval_pipeline.sandbox import QueryResult

GROUPS = [("shipped", 554), ("delivered", 56605), (None, 3), ("returned", 1737)]


def _result(sql: str, rows, *, truncated: bool = False) -> QueryResult:
    return QueryResult(sql, ["status", "n"], ["VARCHAR", "BIGINT"], rows, len(rows), truncated, 1.0)


def test_groups_in_any_order_read_the_same() -> None:
    # DuckDB returns GROUP BY groups in any order: the sample suite's runs_the_pasted_query
    # missed its recorded request now and then, as the tool result the model read moved.
    sql = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"
    one = _result(sql, GROUPS).in_stable_order()
    other = _result(sql, GROUPS[::-1]).in_stable_order()
    assert one.rows == other.rows and one.to_text() == other.to_text()
    assert sorted(one.rows, key=str) == sorted(GROUPS, key=str)  # the same rows, none lost


def test_an_ordered_or_cut_result_keeps_its_order() -> None:
    ordered = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY n DESC"
    assert _result(ordered, GROUPS).in_stable_order().rows == GROUPS
    unordered = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"
    assert _result(unordered, GROUPS, truncated=True).in_stable_order().rows == GROUPS

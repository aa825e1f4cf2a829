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


COUNTRIES = [("US", 3070), ("MX", 238), ("BR", 238), ("IT", 207), (None, 207), ("SE", 145)]


def test_ties_of_an_ordered_query_read_the_same() -> None:
    # Two countries with as many customers came back in either order on a parallel sort: the
    # sample suite's orders_from_japan_last_30_days missed its recorded request in CI.
    for key in ("customer_count DESC", "2 DESC", "CUSTOMER_COUNT desc"):
        sql = f"SELECT country_code, COUNT(*) AS customer_count FROM c GROUP BY 1 ORDER BY {key}"
        one = _country_result(sql, COUNTRIES)
        other = _country_result(
            sql, [COUNTRIES[0], *COUNTRIES[1:3][::-1], *COUNTRIES[3:5][::-1], COUNTRIES[5]]
        )
        assert one.rows == other.rows, key
        assert [n for _, n in one.rows] == [n for _, n in COUNTRIES]  # still sorted on the key
        assert sorted(one.rows, key=str) == sorted(COUNTRIES, key=str)


def test_ties_on_a_key_outside_the_result_keep_their_order() -> None:
    # the key's values are not in the rows, so nothing tells which rows tie
    for sql in (
        "SELECT country_code, n AS customer_count FROM c ORDER BY signup_date",
        "SELECT country_code, n AS customer_count FROM c ORDER BY n * 2",
    ):
        assert _country_result(sql, COUNTRIES[::-1]).rows == COUNTRIES[::-1], sql


def _country_result(sql: str, rows) -> QueryResult:
    columns = ["country_code", "customer_count"]
    return QueryResult(
        sql, columns, ["VARCHAR", "BIGINT"], rows, len(rows), False, 1.0
    ).in_stable_order()

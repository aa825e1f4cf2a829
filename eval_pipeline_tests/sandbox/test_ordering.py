"""Whether a query promises a row order: only an ORDER BY on the outermost query does."""

from __future__ import annotations

import pytest

from eval_pipeline.sandbox import sql_is_ordered


@pytest.mark.parametrize(
    ("sql", "ordered"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("SELECT a, count(*) FROM t GROUP BY ALL ORDER BY 2 DESC LIMIT 5", True),
        ("SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1", True),
        ("(SELECT a FROM t ORDER BY a)", True),
        ("FROM t ORDER BY a", True),
        ("WITH c AS (SELECT a FROM t ORDER BY a) SELECT * FROM c", False),
        ("SELECT * FROM (SELECT a FROM t ORDER BY a) AS s", False),
        ("SELECT row_number() OVER (ORDER BY a) FROM t", False),
        ("SELECT string_agg(a ORDER BY b) FROM t", False),
        ("SELECT 'order by' AS note FROM t -- order by a", False),
        ("SELECT a FROM t UNION ALL (SELECT b FROM u ORDER BY b)", False),
        ("SELEC a FORM t ORDER BY", False),
        ("", False),
    ],
)
def test_sql_is_ordered_looks_only_at_the_outermost_query(sql, ordered):
    assert sql_is_ordered(sql) is ordered

"""Whether a reference query promises a row order (the per-case default for `ordered`)."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["sql_is_ordered"]


# Cached: a reference query is asked about once per run graded, and parsing it is the cost.
@functools.lru_cache(maxsize=4096)
def sql_is_ordered(sql: str, dialect: str = "duckdb") -> bool:
    """Tell whether a query's result has a defined row order.

    Only an ORDER BY on the outermost query orders the rows a caller receives. An ORDER BY
    inside a CTE, a subquery, a window (`OVER (ORDER BY ...)`) or an aggregate
    (`string_agg(x ORDER BY y)`) orders something else, so it does not count. A trailing
    ORDER BY after a `UNION` applies to the whole union, so it does. The query is parsed with
    sqlglot rather than searched for the words, so `order by` in a string literal or comment
    is never mistaken for a clause.

    Args:
        sql: The reference query. With several statements, the last one is the result.
        dialect: The sqlglot dialect to parse with.

    Returns:
        True when the outermost query has ORDER BY; False otherwise, including when the SQL
        cannot be parsed (an unparseable query promises nothing, and the comparison then
        treats rows as a multiset, the lenient choice).
    """
    if not isinstance(sql, str):
        return False
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError):
        return False
    if not statements:
        return False
    node = statements[-1]
    # `(SELECT ... ORDER BY x)` and `(SELECT ...) ORDER BY x` are both ordered at the top.
    while isinstance(node, (exp.Subquery, exp.Paren)):
        if node.args.get("order") is not None:
            return True
        node = node.this
    return isinstance(node, exp.Query) and node.args.get("order") is not None

"""Whether a query promises a row order (the per-case default for `ordered`), and on which output columns."""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["order_columns", "sql_is_ordered"]


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
    return isinstance(sql, str) and _top_order(sql, dialect) is not None


# Cached: a reference query is asked about once per run graded, a query of the agent once
# for its order and once for its sort keys, and parsing it is the cost. The node returned is
# shared between callers: read it, never change it.
@functools.lru_cache(maxsize=4096)
def _top_order(sql: str, dialect: str) -> exp.Order | None:
    """The ORDER BY of the last statement's outermost query, if it has one (None too when
    the SQL cannot be parsed)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError):
        return None
    if not statements:
        return None
    node = statements[-1]
    # `(SELECT ... ORDER BY x)` and `(SELECT ...) ORDER BY x` are both ordered at the top.
    while isinstance(node, (exp.Subquery, exp.Paren)):
        if node.args.get("order") is not None:
            return node.args["order"]
        node = node.this
    return node.args.get("order") if isinstance(node, exp.Query) else None


@functools.lru_cache(maxsize=4096)
def order_columns(sql: str, columns: tuple[str, ...], dialect: str = "duckdb") -> tuple[int, ...]:
    """The output columns an ordered query sorts on, by position in `columns`.

    Rows that tie on every sort key come back in any order (a parallel sort does not keep
    them where they were), so a caller that wants one order from run to run can sort each tie
    by the rest of the row. That needs the sort keys' values, which are in the result only
    when every key is an output column: named by its name or alias (`ORDER BY n DESC`) or by
    position (`ORDER BY 2`).

    Returns:
        The positions, in sort order; empty when the query is not ordered, cannot be parsed,
        or sorts on anything that is not an output column (an expression, a column left out
        of the select list, a name two output columns share).
    """
    order = _top_order(sql, dialect)
    if order is None:
        return ()
    lowered = [c.lower() for c in columns]
    positions: list[int] = []
    for term in order.expressions:
        key = term.this if isinstance(term, exp.Ordered) else term
        if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
            position = int(key.this) - 1
            if not 0 <= position < len(columns):
                return ()
        elif isinstance(key, exp.Column) and not key.table and lowered.count(key.name.lower()) == 1:
            position = lowered.index(key.name.lower())
        else:
            return ()
        positions.append(position)
    return tuple(positions)

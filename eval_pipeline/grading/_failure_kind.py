"""Why an agent's SQL missed the reference: a syntax-tree comparison that names the kind of miss."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer import optimize

from eval_pipeline.suite import truncate

__all__ = ["FailureKind", "FailureReason", "classify_failure"]


class FailureKind(enum.StrEnum):
    """The kind of mistake an agent's final SQL makes against the reference.

    Checked in this order, and the first that applies is reported, because an earlier kind
    usually explains the later ones (other tables bring other joins and other filters).
    """

    UNPARSEABLE = "unparseable"  # one of the two queries does not parse
    TABLES = "tables"  # reads other tables
    JOIN = "join"  # same tables, joined another way (kind or keys)
    FILTER = "filter"  # a WHERE/HAVING predicate missing or extra
    GRAIN = "grain"  # other GROUP BY (one row per something else)
    AGGREGATION = "aggregation"  # other aggregate functions (SUM vs AVG, COUNT(x) vs COUNT(*))
    COLUMNS = "columns"  # other selected expressions, everything above equal
    ORDER_LIMIT = "order_limit"  # other ORDER BY, LIMIT or OFFSET
    SAME_SQL = "same_sql"  # equivalent after normalisation: the data, not the query, differ


@dataclass(frozen=True)
class FailureReason:
    """A failure kind with one short line for a person (names the first differing part)."""

    kind: FailureKind
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def classify_failure(
    agent_sql: str, reference_sql: str, *, dialect: str = "duckdb"
) -> FailureReason:
    """Classify why `agent_sql` returned another answer than `reference_sql`.

    Both queries are parsed with sqlglot and normalised (identifiers lower-cased, table aliases
    and column qualifiers dropped, `GROUP BY 1` and select-alias references replaced by the
    expression they name, the operands of `=` and `<>` put in one order, AND-ed predicates taken
    as a set), then compared part by part across every SELECT of the query (CTEs and
    subqueries included). Equivalent rewrites therefore compare equal: another table alias,
    `GROUP BY 1` for `GROUP BY region`, `JOIN ... USING (k)` for `ON a.k = b.k`, inner joins in
    another order. `COUNT(col)` and `COUNT(*)` are other aggregations, even on a column without
    NULLs: telling them apart needs the data, which the semantic check has.

    Args:
        agent_sql: The agent's final query (the one whose result was graded).
        reference_sql: The test's reference query.
        dialect: The sqlglot dialect both are written in.

    Returns:
        The first kind that applies, in `FailureKind`'s order, with a detail line such as
        "misses the filter status <> 'cancelled'"; `SAME_SQL` when no part differs.
    """
    agent, error = _parse(agent_sql, dialect)
    if agent is None:
        return FailureReason(FailureKind.UNPARSEABLE, f"the agent's SQL does not parse: {error}")
    reference, error = _parse(reference_sql, dialect)
    if reference is None:
        return FailureReason(FailureKind.UNPARSEABLE, f"the reference SQL does not parse: {error}")
    canonical = _optimized(agent, dialect)
    if canonical is not None and canonical == _optimized(reference, dialect):
        return FailureReason(FailureKind.SAME_SQL, _SAME)
    a, r = _Shape.of(agent), _Shape.of(reference)
    if a.tables != r.tables:
        read = _listed(sorted(a.tables), limit=5) or "no table"
        expected = _listed(sorted(r.tables), limit=5) or "no table"
        return FailureReason(FailureKind.TABLES, f"reads {read}; the reference reads {expected}")
    checks = (
        (FailureKind.JOIN, a.joins, r.joins, "join"),
        (FailureKind.FILTER, a.filters, r.filters, "filter"),
        (FailureKind.GRAIN, a.grain, r.grain, "GROUP BY"),
        (FailureKind.AGGREGATION, a.aggregates, r.aggregates, "aggregate"),
        (FailureKind.COLUMNS, a.columns, r.columns, "column"),
        (FailureKind.ORDER_LIMIT, a.order_limit, r.order_limit, "ORDER/LIMIT"),
    )
    for kind, actual, expected, noun in checks:
        if actual != expected:
            return FailureReason(kind, _difference(actual, expected, noun))
    return FailureReason(FailureKind.SAME_SQL, _SAME)


_SAME = (
    "the query is equivalent to the reference after normalisation; the answer differs in the "
    "data it was run on or in how the answer was taken from it"
)


def _parse(sql: str, dialect: str) -> tuple[exp.Expression | None, str]:
    if not isinstance(sql, str) or not sql.strip():
        return None, "no SQL"
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError) as error:
        return None, str(error).splitlines()[0][:200]
    if not statements:
        return None, "no SQL"
    return statements[-1], ""


def _optimized(tree: exp.Expression, dialect: str) -> str | None:
    """sqlglot's canonical form (qualified, simplified), or None when it cannot make one."""
    try:
        return optimize(tree.copy(), dialect=dialect).sql(dialect=dialect)
    except Exception:  # the optimizer raises many types on odd input; compare parts instead
        return None


@dataclass(frozen=True)
class _Shape:
    """The parts of a query compared, each a multiset of normalised SQL strings."""

    tables: Counter[str]
    joins: Counter[str]
    filters: Counter[str]
    grain: Counter[str]
    aggregates: Counter[str]
    columns: Counter[str]
    order_limit: Counter[str]

    @classmethod
    def of(cls, tree: exp.Expression) -> _Shape:
        tree = tree.copy()
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        tables: Counter[str] = Counter()
        for table in tree.find_all(exp.Table):
            if table.name and table.name.lower() not in ctes:
                tables[table.name.lower()] += 1
        joins: Counter[str] = Counter()
        filters: Counter[str] = Counter()
        grain: Counter[str] = Counter()
        aggregates: Counter[str] = Counter()
        columns: Counter[str] = Counter()
        order_limit: Counter[str] = Counter()
        selects = list(tree.find_all(exp.Select))
        for select in selects:
            aliases = {
                e.alias.lower(): e.this for e in select.expressions if isinstance(e, exp.Alias)
            }
            projections = [e.this if isinstance(e, exp.Alias) else e for e in select.expressions]
            for join in select.args.get("joins") or []:
                joins[_join_key(join)] += 1
            for clause in ("where", "having"):
                node = select.args.get(clause)
                if node is not None:
                    filters.update(_text(p) for p in _conjuncts(node.this))
            group = select.args.get("group")
            if group is not None:
                grain.update(_text(_resolve(e, projections, aliases)) for e in group.expressions)
            for projection in projections:
                found = list(projection.find_all(exp.AggFunc))
                aggregates.update(_text(agg) for agg in found)
                if not found:
                    columns[_text(projection)] += 1
            having = select.args.get("having")
            if having is not None:
                aggregates.update(_text(agg) for agg in having.find_all(exp.AggFunc))
        # Only the outermost ORDER BY / LIMIT decide what the caller receives.
        outer = tree
        while isinstance(outer, exp.Subquery | exp.Paren):
            outer = outer.this
        if isinstance(outer, exp.Query):
            aliases, projections = {}, []
            if isinstance(outer, exp.Select):
                aliases = {
                    e.alias.lower(): e.this for e in outer.expressions if isinstance(e, exp.Alias)
                }
                projections = [e.this if isinstance(e, exp.Alias) else e for e in outer.expressions]
            order = outer.args.get("order")
            if order is not None:
                for ordered in order.expressions:
                    key = _text(_resolve(ordered.this, projections, aliases))
                    order_limit[f"ORDER BY {key}{' DESC' if ordered.args.get('desc') else ''}"] += 1
            for clause in ("limit", "offset"):
                node = outer.args.get(clause)
                if node is not None:
                    order_limit[_text(node)] += 1
        return cls(tables, joins, filters, grain, aggregates, columns, order_limit)


def _conjuncts(node: exp.Expression) -> Iterable[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.left)
        yield from _conjuncts(node.right)
    else:
        yield node


def _resolve(
    node: exp.Expression, projections: list[exp.Expression], aliases: dict[str, exp.Expression]
) -> exp.Expression:
    """`GROUP BY 1` and `ORDER BY revenue` (an alias) as the expression they stand for."""
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        position = int(node.this) - 1
        if 0 <= position < len(projections):
            return projections[position]
    if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
        target = aliases[node.name.lower()]
        if not (isinstance(target, exp.Column) and target.name.lower() == node.name.lower()):
            return target
    return node


def _join_key(join: exp.Join) -> str:
    """A join as its kind and the columns it matches on, so `USING (k)` equals `ON a.k = b.k`.

    Inner joins leave out which table comes first (join order does not change the result);
    an outer join keeps the table it adds, since which side is preserved matters.
    """
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    on = join.args.get("on")
    using = join.args.get("using") or []
    keys = {u.name.lower() for u in using}
    if on is not None:
        keys |= {c.name.lower() for c in on.find_all(exp.Column)}
    keys = sorted(keys)
    if kind == "CROSS" or (not keys and not side):
        return "CROSS JOIN"
    if side:
        return f"{side} JOIN {join.this.name.lower()} ON {', '.join(keys)}"
    return f"{kind or 'INNER'} JOIN ON {', '.join(keys)}"


def _text(node: exp.Expression) -> str:
    """Normalised SQL of one expression: no qualifiers, lower-case names, `=` operands sorted."""
    node = node.copy()
    for column in list(node.find_all(exp.Column)):
        column.set("table", None)
        column.set("db", None)
        column.set("catalog", None)
    for identifier in node.find_all(exp.Identifier):
        identifier.set("this", identifier.this.lower())
        identifier.set("quoted", False)
    for comparison in list(node.find_all(exp.EQ, exp.NEQ)):
        left, right = comparison.left, comparison.right
        if _operand_order(right) < _operand_order(left):
            comparison.set("this", right)
            comparison.set("expression", left)
    return node.sql(dialect="duckdb")


def _operand_order(node: exp.Expression) -> tuple[bool, str]:
    # Literals go right, so the detail reads `status <> 'cancelled'`.
    return isinstance(node, exp.Literal), node.sql()


def _difference(actual: Counter[str], expected: Counter[str], noun: str) -> str:
    missing = list((expected - actual).elements())
    extra = list((actual - expected).elements())
    parts = []
    if missing:
        parts.append(f"misses the {noun} {_listed(missing)}")
    if extra:
        parts.append(f"{'has' if missing else 'adds'} the {noun} {_listed(extra)}")
    detail = " and ".join(parts) or f"other {noun}s"
    if noun == "GROUP BY":
        detail += f" (the reference groups by {_listed(list(expected.elements())) or 'nothing'})"
    return detail


def _listed(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(truncate(item, 80) for item in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")

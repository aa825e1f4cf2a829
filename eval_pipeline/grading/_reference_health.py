"""Reference health: warnings that a test's reference answer is empty, undetermined or moving."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from eval_pipeline.grading._compare import compare_results, same_cells
from eval_pipeline.grading._reference import ReferenceResult, frame_from_rows
from eval_pipeline.grading._stability import may_vary_within_day
from eval_pipeline.sandbox import QueryResult, SandboxError, sql_is_ordered
from eval_pipeline.suite import truncate

__all__ = [
    "ReferenceWarning",
    "current_date_warning",
    "drift_warning",
    "limit_ties_warning",
    "no_rows_warning",
    "nondeterminism_warning",
    "reference_health",
]

WarningKind = Literal["no_rows", "ties_at_limit", "nondeterministic", "current_date", "drift"]
Execute = Callable[[str], QueryResult]


@dataclass(frozen=True)
class ReferenceWarning:
    """Something about a reference answer a test's author should know; never a failure."""

    kind: WarningKind
    message: str

    def to_row(self) -> dict[str, str]:
        """As stored in `details.reference_warnings` of a result."""
        return {"kind": self.kind, "message": self.message}


def reference_health(
    result: ReferenceResult,
    execute: Execute,
    *,
    previous: ReferenceResult | None = None,
    previous_test_hash: str | None = None,
    test_hash: str | None = None,
    dialect: str = "duckdb",
) -> list[ReferenceWarning]:
    """Every warning for one reference result, in a fixed order.

    Args:
        result: The reference SQL's result on today's warehouse (`run_references`).
        execute: Runs one query on the same warehouse (`SqlSandbox.execute`); used to run the
            reference a second time and to look one row past its LIMIT.
        previous: The same test's reference result of the previous day, for drift.
        previous_test_hash: The test's `content_hash` that day.
        test_hash: The test's `content_hash` today.
        dialect: The sqlglot dialect of the SQL.
    """
    if result.error is not None:
        return []  # a failing reference is an error of its own, reported as such
    found = [
        no_rows_warning(result),
        limit_ties_warning(result.sql, execute, dialect=dialect),
        nondeterminism_warning(result, execute, dialect=dialect),
        current_date_warning(result.sql, dialect=dialect),
    ]
    if previous is not None and previous_test_hash is not None and test_hash is not None:
        found.append(
            drift_warning(
                previous, result, previous_test_hash=previous_test_hash, test_hash=test_hash
            )
        )
    return [warning for warning in found if warning is not None]


def no_rows_warning(result: ReferenceResult) -> ReferenceWarning | None:
    """An empty reference passes every agent that finds nothing, right or not."""
    if result.error is None and not result.rows:
        return ReferenceWarning(
            "no_rows",
            "the reference returns no rows, so any empty answer passes; check its filters "
            "against the data (a date window past the data, a misspelt value)",
        )
    return None


def limit_ties_warning(
    sql: str, execute: Execute, *, dialect: str = "duckdb"
) -> ReferenceWarning | None:
    """Warn when `ORDER BY ... LIMIT n` cuts between rows with equal sort keys.

    The query is run once more with its sort keys added as columns and `LIMIT n + 1`; when
    row n and row n + 1 have the same keys, which of the tied rows the reference returns is
    not determined, and an agent that returns the other one fails for nothing.
    """
    query = _outer_query(sql, dialect)
    if not isinstance(query, exp.Select) or query.args.get("distinct"):
        return None
    order, limit = query.args.get("order"), query.args.get("limit")
    count = _integer(limit.expression if limit is not None else None)
    if order is None or count is None or count < 1:
        return None
    aliases = {e.alias.lower(): e.this for e in query.expressions if isinstance(e, exp.Alias)}
    projections = [e.this if isinstance(e, exp.Alias) else e for e in query.expressions]
    probe = query.copy()
    names = []
    for i, ordered in enumerate(order.expressions):
        key = _resolve(ordered.this, projections, aliases)
        if key is None:
            return None
        names.append(ordered.this.sql(dialect=dialect))
        probe.select(exp.alias_(key.copy(), f"__tie_key_{i}"), copy=False)
    probe.set("limit", exp.Limit(expression=exp.Literal.number(count + 1)))
    try:
        rows = execute(probe.sql(dialect=dialect)).rows
    except SandboxError:
        return None  # the probe is a best effort; the reference itself ran
    if len(rows) <= count:
        return None
    width = len(order.expressions)
    last, next_row = rows[count - 1][-width:], rows[count][-width:]
    if tuple(last) != tuple(next_row):
        return None
    keys = ", ".join(
        f"{name} = {truncate(repr(value), 40)}" for name, value in zip(names, last, strict=True)
    )
    return ReferenceWarning(
        "ties_at_limit",
        f"ORDER BY ... LIMIT {count} cuts through a tie: rows {count} and {count + 1} both have "
        f"{keys}, so which of them the reference returns is not determined; add a tie-breaker "
        "to the ORDER BY (a key column)",
    )


def nondeterminism_warning(
    result: ReferenceResult, execute: Execute, *, dialect: str = "duckdb"
) -> ReferenceWarning | None:
    """Warn when a second run disagrees with `result`, or the SQL picks rows at random.

    SQL that cannot return other rows on the same data (`_cannot_vary`) is not run again.
    """
    reason = _random_source(result.sql, dialect)
    if not reason and _cannot_vary(result.sql, dialect):
        return None
    try:
        again = execute(result.sql)
    except SandboxError as error:
        return ReferenceWarning(
            "nondeterministic", f"the reference failed when run a second time: {error.message}"
        )
    rows = [list(row) for row in again.rows]
    if same_cells(list(again.columns), rows, result.columns, result.rows):
        comparison = None  # the same answer again, value for value
    else:
        comparison = compare_results(
            frame_from_rows(list(again.columns), rows),
            result.to_frame(),
            ordered=sql_is_ordered(result.sql, dialect),
        )
    if comparison is not None and not comparison.passed:
        cause = f" ({reason})" if reason else ""
        return ReferenceWarning(
            "nondeterministic",
            f"two runs of the reference disagree{cause}: {comparison.message}; the expected "
            "answer is not determined",
        )
    if reason:
        return ReferenceWarning(
            "nondeterministic",
            f"the reference {reason}, so its answer may differ from run to run",
        )
    return None


_NOW_FUNCTIONS = frozenset(
    {"now", "today", "get_current_timestamp", "get_current_time", "current_localtimestamp"}
    | {"localtimestamp", "localtime", "transaction_timestamp", "statement_timestamp"}
    | {"current_date", "current_timestamp", "current_time", "getdate", "sysdate"}
)
_NOW_NODES = (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentTime, exp.CurrentDatetime)


def _clock_reads(tree: exp.Expression, dialect: str) -> list[str]:
    found = [node.sql(dialect=dialect) for node in tree.find_all(*_NOW_NODES)]
    found += [
        node.sql(dialect=dialect)
        for node in tree.find_all(exp.Anonymous)
        if str(node.this).lower() in _NOW_FUNCTIONS
    ]
    return found


def current_date_warning(sql: str, *, dialect: str = "duckdb") -> ReferenceWarning | None:
    """Note a reference that reads the current date or time: its answer moves every day."""
    tree = _parse(sql, dialect)
    found = _clock_reads(tree, dialect) if tree is not None else []
    if not found:
        return None
    return ReferenceWarning(
        "current_date",
        f"the reference reads the current date ({', '.join(sorted(set(found)))}): its answer "
        "moves from day to day, and each day's runs are graded against that day's answer. "
        "Not an error; pin the dates if the test should not move",
    )


def drift_warning(
    previous: ReferenceResult,
    current: ReferenceResult,
    *,
    previous_test_hash: str,
    test_hash: str,
) -> ReferenceWarning | None:
    """Warn when the reference answer changed since the previous day while the test did not.

    Args:
        previous: The reference result of the previous day.
        current: Today's.
        previous_test_hash: The test's `content_hash` the previous day.
        test_hash: Today's; when it differs, the test was edited and a new answer is expected.
    """
    if previous_test_hash != test_hash or previous.result_hash == current.result_hash:
        return None
    return ReferenceWarning(
        "drift",
        f"the reference answer changed since the previous day ({_size(previous)} then, "
        f"{_size(current)} now) while the test did not: the data moved under it, so verdicts "
        "of the two days are not comparable",
    )


# --- helpers ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _parse(sql: str, dialect: str) -> exp.Expression | None:
    # The checks of one reference read one tree (copying it before they change it).
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, ValueError):
        return None
    return statements[-1] if statements else None


def _outer_query(sql: str, dialect: str) -> exp.Expression | None:
    node = _parse(sql, dialect)
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    return node


def _integer(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


def _resolve(
    key: exp.Expression, projections: list[exp.Expression], aliases: dict[str, exp.Expression]
) -> exp.Expression | None:
    """A sort key as an expression valid in the select list (ordinals and aliases resolved)."""
    position = _integer(key)
    if position is not None:
        if not 1 <= position <= len(projections) or isinstance(projections[position - 1], exp.Star):
            return None
        return projections[position - 1]
    if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
        return aliases[key.name.lower()]
    return key


_RANDOM_FUNCTIONS = frozenset({"random", "rand", "uuid", "gen_random_uuid", "setseed"})


def _random_source(sql: str, dialect: str) -> str:
    """Why the SQL may return other rows on each run, or "" when nothing in it says so."""
    tree = _parse(sql, dialect)
    if tree is None:
        return ""
    if any(True for _ in tree.find_all(exp.Rand)) or any(
        str(node.this).lower() in _RANDOM_FUNCTIONS for node in tree.find_all(exp.Anonymous)
    ):
        return "calls a random function"
    if any(True for _ in tree.find_all(exp.TableSample)):
        return "samples rows (USING SAMPLE / TABLESAMPLE)"
    outer = _outer_query(sql, dialect)
    if (
        isinstance(outer, exp.Query)
        and outer.args.get("limit") is not None
        and outer.args.get("order") is None
    ):
        return "takes LIMIT rows without ORDER BY"
    return ""


#: Aggregates whose value does not depend on the order the rows come in (a sum of floats
#: only up to rounding noise, which the comparison's tolerance absorbs).
_ORDER_FREE_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
#: What picks, orders or samples rows, where ties or the scan order decide which come out;
#: and a function sqlglot does not know (`exp.Anonymous`), which may be an aggregate.
_ORDER_DECIDES = (
    *(exp.Limit, exp.Offset, exp.Fetch, exp.Order, exp.Window, exp.Qualify),
    *(exp.TableSample, exp.Anonymous),
)


def _cannot_vary(sql: str, dialect: str) -> bool:
    """Whether the query returns the same rows (as a multiset) on every run over the same
    data: every function it calls is one DuckDB declares consistent (`may_vary_within_day`),
    the only aggregates are order-free ones, and nothing in it limits, orders, numbers or
    samples rows. False when in doubt (SQL that does not parse, DISTINCT ON, another dialect
    than DuckDB's): the reference is then run a second time to see."""
    tree = _parse(sql, dialect)
    if tree is None or may_vary_within_day(sql, dialect=dialect):
        return False
    for node in tree.walk():
        if isinstance(node, _ORDER_DECIDES):
            return False
        if isinstance(node, exp.AggFunc) and not isinstance(node, _ORDER_FREE_AGGREGATES):
            return False
        if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
            return False
    return True


def _size(result: ReferenceResult) -> str:
    if result.error is not None:
        return "an error"
    return f"{result.row_count} row{'s' if result.row_count != 1 else ''}"

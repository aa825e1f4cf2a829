"""Compare an agent's result table with the reference result, as data.

How it works, in four steps:

1. **Normalise each column** to one kind with a canonical, exactly comparable key array:
   numbers -> float64 rounded to `decimals` (NaN for null); booleans -> int8; timestamps and
   dates -> int64 microseconds since the epoch in UTC; durations -> int64 microseconds; strings
   (stripped) -> integer codes from one joint factorisation of both sides. A string column
   whose every value is a number string becomes a number column. A column mixing types becomes
   one token per value (`("n", 1.0)`, `("s", "x")`, ...), so `True` and `1` stay different;
   its numbers compare after rounding but without tolerance.
2. **Line columns up**: by name (stripped, case-insensitive); when both sides have as many
   columns, expected columns left over are matched by values with a bounded search over
   assignments, pruned by per-column checks. With extra actual columns, names decide.
3. **Fast exact path** (unordered): hash every row over the keys, sort both hash arrays, and
   when they agree confirm key by key along that order. Most passing results stop here.
4. **Tolerant path**, only when the exact path fails: rows are grouped by their exact
   (non-number) keys; only groups holding an unmatched row are compared again, sorted by their
   numbers and paired in that order with the tolerance (sorted pairing is optimal for one
   number column); a group that still fails and has at most 200 rows gets an exact bipartite
   matching, so with several number columns a pairing that sorting missed is still found
   (larger groups keep the sorted pairing's verdict). The unmatched rows form the diff; the
   closest actual row to the first unmatched expected row names the first differing cell.

Ordered comparison skips 3 and 4 and compares row i with row i.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.grading._normalise import (
    _cells_equal,
    _Column,
    _Columns,
    _is_null,
    _Pair,
    _pair,
    _parsed_time,
    _Tolerance,
)
from eval_pipeline.grading._row_matching import _as_u64, _compare_rows, _Outcome

__all__ = ["DIFF_ROW_LIMIT", "Comparison", "compare_results", "exact_match", "same_cells"]

DIFF_ROW_LIMIT = 1_000
"""At most this many differing rows per side are kept in `Comparison.diff`."""

#: Past this many cells, a result with a column of Python objects takes the full comparison
#: even when it is identical: checking each object costs about what normalising it does.
_EXACT_OBJECT_CELLS = 100_000
_MAX_ASSIGNMENTS = 120  # column assignments tried when matching columns by values
_ASSIGNMENT_CELL_BUDGET = 50_000_000  # ... and fewer when each try compares many cells


@dataclass(frozen=True, eq=False)
class Comparison:
    """The verdict of `compare_results`.

    Attributes:
        passed: Whether the actual result equals the expected one under the comparison rules.
        message: One line for a person: `"match"`, or the first difference found (a missing
            column, the row counts, or a cell with its column, row and both values).
        diff: The differing rows, empty when passed. Columns: `_side` (`"actual only"` /
            `"expected only"` for unordered comparison, `"actual"` / `"expected"` for ordered),
            `_row` (the row's position in its own input), then the expected columns holding
            the original values. At most `DIFF_ROW_LIMIT` rows per side.
    """

    passed: bool
    message: str
    diff: pd.DataFrame = field(repr=False)


def compare_results(
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    ordered: bool = False,
    decimals: int | None = 2,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> Comparison:
    """Compare an agent's result table with the expected result, as data.

    Columns are matched by name, stripped and case-insensitively (`Revenue ` is `revenue`);
    actual columns the expected result does not have are ignored, since an agent may add
    context. When names do not line up and both results have as many columns, the remaining
    expected columns are matched to actual columns by their values, because an agent that
    names `sum(amount)` `total` instead of `revenue` still gave the right answer; the message
    then says which columns were matched that way. With extra actual columns, names decide:
    among several columns one may hold the expected values by chance (a count where revenue
    was asked), and taking it would pass a wrong answer. The index of either frame is ignored.

    Values compare by meaning rather than by dtype: `1 == 1.0`; `Decimal("1.5") == 1.5`;
    number strings are numbers (`"$1,234.56"`, `"1.234,56"` and `" 1234.56 "` all equal
    1234.56) when every value of that string column parses; NULL, None, NaN, NA and NaT are
    all null and equal each other, but null is not `0` and not `""`; a date equals the
    midnight timestamp of that day; timezone-aware timestamps are compared in UTC, naive ones
    are taken as UTC, and timestamps are compared to the microsecond (DuckDB's precision);
    strings compare exactly after stripping surrounding whitespace. Booleans are not numbers:
    `True != 1`, because an agent that answers "is it active?" with a count is wrong.

    Args:
        actual: The agent's result.
        expected: The reference result (usually the test's SQL run on the warehouse).
        ordered: Compare row i with row i. Off by default, because SQL returns rows in no
            particular order unless the query says ORDER BY; rows are then compared as a
            multiset, so duplicates count. Use `sql_is_ordered(reference_sql)` as the default.
        decimals: Round numbers to this many decimal places before comparing, so display
            precision (`12.35` for `12.3456`) does not fail a test. `None` disables rounding.
        rtol: Relative tolerance, as in `numpy.isclose`: `|a - b| <= atol + rtol * |b|` with
            `b` the expected value. Numbers are equal when they are within tolerance after
            rounding, or before it, so floating-point noise at a rounding boundary
            (`0.125000001` vs `0.124999999`) cannot fail a test.
        atol: Absolute tolerance, see `rtol`.

    Percentages are deliberately left as strings: `"12%"` could mean 12 or 0.12, and guessing
    would let a wrong answer pass, so `"12%"` equals only `"12%"`.

    Returns:
        A `Comparison` with `passed`, a one-line `message` and the differing rows as `diff`.

    Raises:
        TypeError: If `actual` or `expected` is not a pandas DataFrame.
        ValueError: If a tolerance is negative.
    """
    for name, frame in (("actual", actual), ("expected", expected)):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"tolerances must not be negative (rtol={rtol}, atol={atol})")
    tol = _Tolerance(decimals, rtol, atol)
    n_a, n_e = len(actual), len(expected)
    names = [str(c) for c in expected.columns]
    if actual.shape[1] == 0 and n_a == 0:
        if n_e == 0:
            return _passed(names, "match")
        return _failed(names, f"actual result is empty; expected {n_e} rows")

    mapping = _match_names(list(actual.columns), list(expected.columns))
    missing = [j for j in range(len(names)) if j not in mapping]
    if missing and (actual.shape[1] != expected.shape[1] or n_a == n_e == 0):
        return _failed(names, _missing_message(names[missing[0]], actual, expected))
    if n_a == n_e == 0:
        return _passed(names, "match")
    if exact_match(actual, expected) is not None:
        return _passed(names, "match")
    a_cols, e_cols = _Columns(actual, tol), _Columns(expected, tol)
    if not missing:
        pairs = [
            _pair(a_cols[mapping[j]], e_cols[j], tol, j, mapping[j]) for j in range(len(names))
        ]
        return _verdict(_compare_rows(pairs, n_a, n_e, ordered, tol), pairs, actual, expected, tol)
    if n_a != n_e:
        return _failed(names, f"row count differs: actual {n_a}, expected {n_e}")
    return _compare_by_values(actual, expected, mapping, missing, a_cols, e_cols, ordered, tol)


# --- identical results ----------------------------------------------------------------


def same_cells(
    actual_columns: list, actual_rows: list[list], expected_columns: list, expected_rows: list[list]
) -> bool:
    """Whether two results are the same cell for cell: the same column names in the same
    order, and in each place a value of the same type that compares equal.

    Such results match under every rule of `compare_results`, so its normalisation (the
    cost of a comparison, milliseconds even for one row) is only needed when they are not.
    The type test keeps `True` apart from `1` and `1.0` (Python has them equal, the rules do
    not); NaN is never equal to itself, so a result holding one takes the full comparison.
    """
    if actual_columns != expected_columns or len(actual_rows) != len(expected_rows):
        return False
    for actual_row, expected_row in zip(actual_rows, expected_rows, strict=True):
        if len(actual_row) != len(expected_row):
            return False
        for a, e in zip(actual_row, expected_row, strict=True):
            if type(a) is not type(e) or a != e:
                return False
    return True


def exact_match(actual: pd.DataFrame, expected: pd.DataFrame) -> Comparison | None:
    """The passing verdict when the two frames are the same cell for cell (`same_cells`),
    else None: the comparison has to look closer.

    Column by column, stopping at the first that differs: a column of one NumPy dtype on
    both sides compares as arrays (NaN and NaT differ from themselves there too); a column
    of Python objects or of an extension dtype compares cell by cell, and only in a small
    result (`_EXACT_OBJECT_CELLS`): in a large one that would cost more than the full
    comparison it might save.
    """
    if actual.shape != expected.shape or list(actual.columns) != list(expected.columns):
        return None
    rows = actual.shape[0]
    for position in range(actual.shape[1]):
        a, e = actual.iloc[:, position], expected.iloc[:, position]
        if a.dtype != e.dtype:
            return None
        if isinstance(a.dtype, np.dtype) and a.dtype.kind in "biufcmM":
            if not np.array_equal(a.to_numpy(), e.to_numpy()):
                return None
        elif rows * actual.shape[1] > _EXACT_OBJECT_CELLS or not same_cells(
            [0], [[value] for value in a.tolist()], [0], [[value] for value in e.tolist()]
        ):
            return None
    return _passed([str(c) for c in expected.columns], "match")


# --- column matching ------------------------------------------------------------------


def _match_names(actual: list, expected: list) -> dict[int, int]:
    """Expected column position -> actual position, exact (stripped) names first."""
    mapping: dict[int, int] = {}
    for fold in (str.strip, lambda name: name.strip().casefold()):
        taken = set(mapping.values())
        for j, name in enumerate(expected):
            if j in mapping:
                continue
            target = fold(str(name))
            for i, candidate in enumerate(actual):
                if i not in taken and fold(str(candidate)) == target:
                    mapping[j] = i
                    taken.add(i)
                    break
    return mapping


def _same_values(a: _Column, e: _Column, ordered: bool, tol: _Tolerance) -> bool:
    """Whether one actual column could stand for one expected column on its own."""
    if a.null_count != e.null_count:
        return False
    if {a.kind, e.kind} == {"string", "datetime"}:
        if _parsed_time(a if a.kind == "string" else e) is None:
            return False
    elif a.kind != e.kind:
        return False  # a column of NULLs only has kind "null" on both sides
    pair = _pair(a, e, tol, 0, 0)
    if pair.hint:
        return False
    if ordered:
        return bool(_cells_equal(pair, None, None, tol).all())
    if pair.kind == "number":  # sorted pairing decides a single number column exactly
        return bool(_cells_equal(pair, np.argsort(pair.a_raw), np.argsort(pair.e_raw), tol).all())
    return np.array_equal(np.sort(_as_u64(pair.a_keys)), np.sort(_as_u64(pair.e_keys)))


def _assignments(order: list[int], candidates: dict[int, list[int]]) -> Iterator[dict[int, int]]:
    """Every injective choice of one candidate actual column per expected column."""
    chosen: dict[int, int] = {}

    def extend(depth: int) -> Iterator[dict[int, int]]:
        if depth == len(order):
            yield dict(chosen)
            return
        j = order[depth]
        for i in candidates[j]:
            if i not in chosen.values():
                chosen[j] = i
                yield from extend(depth + 1)
                del chosen[j]

    return extend(0)


def _compare_by_values(
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    mapping: dict[int, int],
    missing: list[int],
    a_cols: _Columns,
    e_cols: _Columns,
    ordered: bool,
    tol: _Tolerance,
) -> Comparison:
    names = [str(c) for c in expected.columns]
    free = [i for i in range(actual.shape[1]) if i not in mapping.values()]
    candidates = {
        j: [i for i in free if _same_values(a_cols[i], e_cols[j], ordered, tol)] for j in missing
    }
    order = sorted(missing, key=lambda j: len(candidates[j]))
    cells = max(1, len(expected) * len(names))
    budget = max(1, min(_MAX_ASSIGNMENTS, _ASSIGNMENT_CELL_BUDGET // cells))
    first_failure = None
    for assignment in islice(_assignments(order, candidates), budget):
        full = mapping | assignment
        pairs = [_pair(a_cols[full[j]], e_cols[j], tol, j, full[j]) for j in range(len(names))]
        outcome = _compare_rows(pairs, len(actual), len(expected), ordered, tol)
        note = "columns matched by values: " + ", ".join(
            f"actual {actual.columns[assignment[j]]!r} as {names[j]!r}" for j in missing
        )
        if outcome.passed:
            return _verdict(outcome, pairs, actual, expected, tol, note)
        if first_failure is None:
            first_failure = (outcome, pairs, note)
    if first_failure is None:
        lacking = next((j for j in missing if not candidates[j]), missing[0])
        return _failed(names, _missing_message(names[lacking], actual, expected, by_values=True))
    outcome, pairs, note = first_failure
    return _verdict(outcome, pairs, actual, expected, tol, note + "; no assignment matches")


# --- reporting ------------------------------------------------------------------------


def _missing_message(
    name: str, actual: pd.DataFrame, expected: pd.DataFrame, *, by_values: bool = False
) -> str:
    have = ", ".join(repr(str(c)) for c in actual.columns) or "none"
    reason = ": no actual column has that name or the same values" if by_values else ""
    n_a, n_e = actual.shape[1], expected.shape[1]
    # Say why a column holding the right values was not taken: only names count here.
    rule = (
        f"; with {n_a} actual columns for {n_e} expected, columns are matched by name only "
        "(by values only when the counts are equal)"
        if n_a > n_e
        else ""
    )
    return f"missing column {name!r}{reason} (actual columns: {have}){rule}"


def _empty_diff(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=["_side", "_row", *names])


def _passed(names: list[str], message: str) -> Comparison:
    return Comparison(True, message, _empty_diff(names))


def _failed(names: list[str], message: str) -> Comparison:
    return Comparison(False, message, _empty_diff(names))


def _show(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if _is_null(value):
        return "NULL"
    return repr(value) if isinstance(value, str) else str(value)


def _verdict(
    outcome: _Outcome,
    pairs: list[_Pair],
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    tol: _Tolerance,
    note: str = "",
) -> Comparison:
    names = [str(c) for c in expected.columns]
    suffix = f" ({note})" if note else ""
    if outcome.passed:
        return _passed(names, "match" + suffix)
    diff = _diff(outcome, pairs, actual, expected, names)
    n_a, n_e = len(actual), len(expected)
    if n_a != n_e:
        return Comparison(False, f"row count differs: actual {n_a}, expected {n_e}{suffix}", diff)
    return Comparison(
        False, _first_difference(outcome, pairs, actual, expected, tol) + suffix, diff
    )


def _diff(
    outcome: _Outcome,
    pairs: list[_Pair],
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    names: list[str],
) -> pd.DataFrame:
    rows_a, rows_e = outcome.bad_a[:DIFF_ROW_LIMIT], outcome.bad_e[:DIFF_ROW_LIMIT]
    labels = ("actual", "expected") if outcome.ordered else ("actual only", "expected only")
    side = np.repeat(np.array(labels, dtype=object), [len(rows_a), len(rows_e)])
    row = np.concatenate([rows_a, rows_e])
    # Ordered: actual row i next to expected row i ("actual" sorts before "expected").
    order = np.lexsort((side, row)) if outcome.ordered else np.arange(len(row))
    columns = [side[order], row[order]]
    for pair in pairs:
        a = actual.iloc[rows_a, pair.a_pos].to_numpy()
        e = expected.iloc[rows_e, pair.e_pos].to_numpy()
        if a.dtype != e.dtype:
            a, e = a.astype(object), e.astype(object)
        columns.append(np.concatenate([a, e])[order])
    diff = pd.DataFrame(dict(enumerate(columns)))
    diff.columns = ["_side", "_row", *names]
    return diff


def _first_difference(
    outcome: _Outcome,
    pairs: list[_Pair],
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    tol: _Tolerance,
) -> str:
    bad_a, bad_e, n = outcome.bad_a, outcome.bad_e, len(expected)
    if outcome.ordered:
        row_a = row_e = int(bad_e[0])
        where, tally = f"row {row_e}", f"{len(bad_e)} of {n} rows differ"
    else:
        tally = f"{len(bad_e)} of {n} expected rows have no match in actual"
        if len(bad_e) == 0 or len(bad_a) == 0:
            return f"actual row {bad_a[0]} has no match in expected" if len(bad_a) else tally
        row_e = int(bad_e[0])
        candidates = bad_a
        same = np.full(len(candidates), row_e)
        score = sum(_cells_equal(p, candidates, same, tol).astype(np.int64) for p in pairs)
        row_a = int(candidates[np.argmax(score)])
        where = f"expected row {row_e} (closest actual row {row_a})"
    one_a, one_e = np.array([row_a]), np.array([row_e])
    for pair in pairs:
        if not _cells_equal(pair, one_a, one_e, tol)[0]:
            shown_a = _show(actual.iat[row_a, pair.a_pos])
            shown_e = _show(expected.iat[row_e, pair.e_pos])
            name = str(expected.columns[pair.e_pos])
            return f"column {name!r} differs at {where}: actual {shown_a}, expected {shown_e}{pair.hint}; {tally}"
    return f"expected row {row_e} has no match in actual; {tally}"

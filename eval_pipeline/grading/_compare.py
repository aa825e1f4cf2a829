"""Compare an agent's result table with the reference result, as data.

How it works, in four steps:

1. **Normalise each column** to one kind with a canonical, exactly comparable key array:
   numbers -> float64 rounded to `decimals` (NaN for null); booleans -> int8; timestamps and
   dates -> int64 microseconds since the epoch in UTC; durations -> int64 microseconds; strings
   (stripped) -> integer codes from one joint factorisation of both sides. A string column
   whose every value is a number string becomes a number column. A column mixing types becomes
   one token per value (`("n", 1.0)`, `("s", "x")`, ...), so `True` and `1` stay different;
   its numbers compare after rounding but without tolerance.
2. **Line columns up**: by name (stripped, case-insensitive); expected columns left over are
   matched by values with a bounded search over assignments, pruned by per-column checks.
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

import decimal
import numbers
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

__all__ = ["DIFF_ROW_LIMIT", "Comparison", "compare_results"]

DIFF_ROW_LIMIT = 1_000
"""At most this many differing rows per side are kept in `Comparison.diff`."""

_MAX_ASSIGNMENTS = 120  # column assignments tried when matching columns by values
_ASSIGNMENT_CELL_BUDGET = 50_000_000  # ... and fewer when each try compares many cells
_MATCHING_GROUP_ROWS = 200  # a failing group up to this size per side gets an exact matching
_MATCHING_GROUPS = 2_000  # ... for at most this many failing groups
_NULL_TIME = np.iinfo(np.int64).min
_CURRENCY = "$€£¥"
_SIGN = rf"(?:[+-]?[{_CURRENCY}]?|[{_CURRENCY}][+-])"
_TAIL = rf"(?:[eE][+-]?[0-9]+)?(?:\s?[{_CURRENCY}])?"
# [0-9] rather than \d: pyarrow's RE2 and Python's re must agree on what a digit is.
_US_NUMBER = _SIGN + r"(?:(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)" + _TAIL
_EU_NUMBER = _SIGN + r"(?:(?:[0-9]{1,3}(?:\.[0-9]{3})+|[0-9]+)(?:,[0-9]+)?|,[0-9]+)" + _TAIL
_KIND_NAMES = {
    "number": "numbers",
    "bool": "booleans",
    "datetime": "timestamps",
    "timedelta": "durations",
    "string": "strings",
    "mixed": "mixed values",
    "null": "only NULLs",
}


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
    context. When names do not line up but the actual result has at least as many columns,
    the remaining expected columns are matched to actual columns by their values, because an
    agent that names `sum(amount)` `total` instead of `revenue` still gave the right answer.
    The index of either frame is ignored.

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
    if missing and (actual.shape[1] < expected.shape[1] or n_a == n_e == 0):
        return _failed(names, _missing_message(names[missing[0]], actual, by_values=False))
    if n_a == n_e == 0:
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


# --- tolerance ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tolerance:
    decimals: int | None
    rtol: float
    atol: float

    def round(self, values: np.ndarray) -> np.ndarray:
        """Round to `decimals` (a new array), with -0.0 -> 0.0 and one NaN bit pattern."""
        if self.decimals is None:
            out = values + 0.0
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                out = np.round(values, self.decimals)
                # Beyond 2**52 / 10**d a float has no digits to round; x * 10**d may overflow.
                huge = ~(np.abs(values) < 2.0**52 / 10.0**self.decimals)
                # numpy rounds x * 10**d, and that product can land exactly on a half when
                # x lies just above or below it (0.005 * 100 == 0.5): there the product's
                # rounding error says which side x is on, as "%.2f" display would round.
                scale = 10.0**self.decimals
                scaled = values * scale
                below = np.floor(scaled)
                on_half = (scaled - below == 0.5) & ~huge
            if on_half.any():
                error = _product_error(values[on_half], scale, scaled[on_half])
                exact = np.round(scaled[on_half])  # a true half: round half to even
                fixed = np.where(
                    error > 0, below[on_half] + 1, np.where(error < 0, below[on_half], exact)
                )
                out[on_half] = fixed / scale
            out[huge] = values[huge]
            out += 0.0
        out[np.isnan(out)] = np.nan
        return out

    def round_scalar(self, value: float) -> float:
        return self.round(np.array([value], dtype=np.float64))[0].item()

    def close(self, a_raw, e_raw, a_rounded, e_rounded) -> np.ndarray:
        """Elementwise: both null, or within tolerance after rounding or before it."""
        with np.errstate(invalid="ignore", over="ignore"):
            ok = a_rounded == e_rounded  # also inf == inf, which the differences below miss
            ok |= np.abs(a_rounded - e_rounded) <= self.atol + self.rtol * np.abs(e_rounded)
            ok |= np.abs(a_raw - e_raw) <= self.atol + self.rtol * np.abs(e_raw)
        ok |= np.isnan(a_rounded) & np.isnan(e_rounded)
        return ok


def _product_error(a: np.ndarray, b: float, product: np.ndarray) -> np.ndarray:
    """The rounding error of `a * b` (so that a * b == product + error exactly): Dekker's
    two-product, since numpy has no fused multiply-add."""

    def split(x):
        c = 134217729.0 * x  # 2**27 + 1
        high = c - (c - x)
        return high, x - high

    a_high, a_low = split(a)
    b_high, b_low = split(np.float64(b))
    return ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low


# --- column normalisation ---------------------------------------------------------------


@dataclass(eq=False)
class _Column:
    kind: str
    # number: rounded float64 (NaN null); bool: int8 (-1 null); datetime/timedelta: int64
    # microseconds (_NULL_TIME null); string/mixed: Series of str (NaN null); null: None.
    values: Any
    length: int
    raw: np.ndarray | None = None  # number only: before rounding
    null_count: int = 0
    parsed_time: _Column | None = None  # string only: memo of the timestamp parse


class _Columns:
    """A frame's columns, normalised on first use (extra actual columns never are)."""

    def __init__(self, frame: pd.DataFrame, tol: _Tolerance) -> None:
        self._frame, self._tol, self._done = frame, tol, {}

    def __getitem__(self, pos: int) -> _Column:
        if pos not in self._done:
            self._done[pos] = _normalise(self._frame.iloc[:, pos], self._tol)
        return self._done[pos]


def _normalise(series: pd.Series, tol: _Tolerance) -> _Column:
    dtype = series.dtype
    if ptypes.is_object_dtype(dtype) or ptypes.is_complex_dtype(dtype):
        column = _normalise_objects(series, tol)
    elif ptypes.is_bool_dtype(dtype):
        column = _Column(
            "bool", series.to_numpy(dtype="float64", na_value=-1).astype(np.int8), len(series)
        )
    elif ptypes.is_numeric_dtype(dtype):
        raw = series.to_numpy(dtype="float64", na_value=np.nan)
        rounded = raw if ptypes.is_integer_dtype(dtype) else tol.round(raw)
        column = _Column("number", rounded, len(series), raw=raw)
    elif ptypes.is_datetime64_any_dtype(dtype):
        column = _Column("datetime", _micros(series), len(series))
    elif ptypes.is_timedelta64_dtype(dtype):
        column = _Column("timedelta", _duration_micros(series), len(series))
    elif ptypes.is_string_dtype(dtype):
        column = _normalise_strings(series.astype("str"), tol)
    else:  # categoricals, periods, intervals, arrow lists and structs, ...
        column = _normalise_objects(series.astype(object), tol)
    column.null_count = int(_null_mask(column).sum())
    if column.length and column.null_count == column.length:
        return _Column("null", None, column.length, null_count=column.length)
    return column


def _normalise_objects(series: pd.Series, tol: _Tolerance) -> _Column:
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    n = len(series)
    try:
        if inferred in ("string",):
            return _normalise_strings(series.astype("str"), tol)
        if inferred in ("integer", "floating", "mixed-integer-float", "decimal"):
            raw = pd.to_numeric(series).to_numpy(dtype="float64", na_value=np.nan)
            return _Column("number", tol.round(raw), n, raw=raw)
        if inferred == "boolean":
            values = pd.array(series.to_numpy(), dtype="boolean").to_numpy(
                dtype="int8", na_value=-1
            )
            return _Column("bool", values, n)
        if inferred in ("date", "datetime", "datetime64"):
            return _Column("datetime", _micros(series), n)
        if inferred in ("timedelta", "timedelta64"):
            return _Column("timedelta", _duration_micros(series), n)
        if inferred == "empty":
            return _Column("null", None, n, null_count=n)
    except (TypeError, ValueError, OverflowError):
        pass  # e.g. ints beyond float range, timestamps beyond any unit: compare as tokens
    tokens = [_token(v, tol) for v in series.tolist()]
    return _Column("mixed", pd.Series(tokens, dtype="str"), n)


def _normalise_strings(values: pd.Series, tol: _Tolerance) -> _Column:
    stripped = values.str.strip()
    parsed = _parse_numbers(stripped)
    if parsed is not None:
        return _Column("number", tol.round(parsed), len(values), raw=parsed)
    return _Column("string", stripped.reset_index(drop=True), len(values))


def _parse_numbers(stripped: pd.Series) -> np.ndarray | None:
    """The column as numbers when every non-null value is a number string, else None."""
    present = stripped.notna().to_numpy()
    if not present.any():
        return None
    first = stripped.iat[int(present.argmax())]
    for pattern, group_mark, decimal_mark in ((_US_NUMBER, ",", "."), (_EU_NUMBER, ".", ",")):
        # One value decides cheaply for the common case of a column of words.
        if not re.fullmatch(pattern, first):
            continue
        if not (
            stripped.str.fullmatch(pattern).to_numpy(dtype=bool, na_value=False) | ~present
        ).all():
            continue
        cleaned = stripped.str.replace(rf"[\s{_CURRENCY}]", "", regex=True)
        cleaned = cleaned.str.replace(group_mark, "", regex=False)
        if decimal_mark == ",":
            cleaned = cleaned.str.replace(",", ".", regex=False)
        return pd.to_numeric(cleaned).to_numpy(dtype="float64", na_value=np.nan)
    return None


def _micros(series: pd.Series) -> np.ndarray:
    """Timestamps (or dates) as int64 microseconds since the epoch, UTC; naive means UTC."""
    if not isinstance(series.dtype, np.dtype):  # tz-aware, arrow, or objects (dates)
        series = pd.to_datetime(series, utc=True).dt.tz_localize(None)
    return series.to_numpy().astype("datetime64[us]").view(np.int64)


def _duration_micros(series: pd.Series) -> np.ndarray:
    return pd.to_timedelta(series).to_numpy().astype("timedelta64[us]").view(np.int64)


def _null_mask(column: _Column) -> np.ndarray:
    values = column.values
    if column.kind == "null":
        return np.ones(column.length, dtype=bool)
    if column.kind == "number":
        return np.isnan(values)
    if column.kind == "bool":
        return values < 0
    if column.kind in ("datetime", "timedelta"):
        return values == _NULL_TIME
    return values.isna().to_numpy()


def _is_null(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict, set, np.ndarray)):
        return False
    null = pd.isna(value)
    return isinstance(null, (bool, np.bool_)) and bool(null)


def _token(value: Any, tol: _Tolerance) -> str | None:
    """A value of a mixed column as the repr of a type-tagged tuple (None for null)."""
    return None if _is_null(value) else repr(_token_parts(value, tol))


def _token_parts(value: Any, tol: _Tolerance) -> tuple:
    if _is_null(value):
        return ("z",)
    if isinstance(value, (bool, np.bool_)):
        return ("b", bool(value))
    if isinstance(value, (numbers.Real, decimal.Decimal)):  # also numpy numbers
        return ("n", tol.round_scalar(float(value)))
    if isinstance(value, str):
        return ("s", value.strip())
    if isinstance(value, (pd.Timestamp, np.datetime64)) or hasattr(value, "isocalendar"):
        try:
            stamp = pd.Timestamp(value)
            if stamp.tzinfo is not None:
                stamp = stamp.tz_convert("UTC").tz_localize(None)
            return ("t", int(stamp.to_datetime64().astype("datetime64[us]").astype(np.int64)))
        except (TypeError, ValueError, OverflowError):
            return ("t", str(value))
    if isinstance(value, (pd.Timedelta, np.timedelta64)) or hasattr(value, "total_seconds"):
        return (
            "d",
            int(pd.Timedelta(value).to_timedelta64().astype("timedelta64[us]").astype(np.int64)),
        )
    if isinstance(value, (list, tuple, np.ndarray)):
        return ("l", tuple(_token_parts(v, tol) for v in value))
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: str(item[0]))
        return ("m", tuple((str(k), _token_parts(v, tol)) for k, v in items))
    return (type(value).__name__, str(value))


def _as_mixed(column: _Column, tol: _Tolerance) -> _Column:
    """The column as type-tagged tokens, so it compares with a column of another kind."""
    if column.kind == "mixed":
        return column
    tag = {"number": "n", "bool": "b", "datetime": "t", "timedelta": "d", "string": "s"}
    if column.kind == "null":
        tokens: list = [None] * column.length
    elif column.kind == "string":
        tokens = [None if v is None or v != v else repr(("s", v)) for v in column.values.tolist()]
    else:
        null = _null_mask(column)
        values = column.values.astype(bool) if column.kind == "bool" else column.values
        tokens = [
            None if n else repr((tag[column.kind], v))
            for v, n in zip(values.tolist(), null, strict=True)
        ]
    return _Column(
        "mixed", pd.Series(tokens, dtype="str"), column.length, null_count=column.null_count
    )


def _parsed_time(column: _Column) -> _Column | None:
    """A string column as timestamps, when every value parses as ISO 8601 (memoised)."""
    if column.parsed_time is None:
        try:
            parsed = pd.to_datetime(column.values, format="ISO8601", utc=True)
            values = _micros(parsed)
        except (TypeError, ValueError, OverflowError):
            values = None
        column.parsed_time = _Column(
            "datetime", values, column.length, null_count=column.null_count
        )
    return column.parsed_time if column.parsed_time.values is not None else None


# --- column pairs ---------------------------------------------------------------------


@dataclass(eq=False)
class _Pair:
    """One expected column and the actual column matched to it, as comparable keys."""

    e_pos: int
    a_pos: int
    kind: str
    a_keys: np.ndarray
    e_keys: np.ndarray
    a_raw: np.ndarray | None = None
    e_raw: np.ndarray | None = None
    hint: str = ""


def _nulls(kind: str, n: int) -> _Column:
    if kind == "number":
        values = np.full(n, np.nan)
        return _Column(kind, values, n, raw=values, null_count=n)
    if kind in ("string", "mixed"):
        return _Column(kind, pd.Series([None] * n, dtype="str"), n, null_count=n)
    fill = -1 if kind == "bool" else _NULL_TIME
    return _Column(
        kind, np.full(n, fill, dtype=np.int8 if kind == "bool" else np.int64), n, null_count=n
    )


def _pair(a: _Column, e: _Column, tol: _Tolerance, e_pos: int, a_pos: int) -> _Pair:
    hint = ""
    if a.kind == "null" and e.kind != "null":
        a = _nulls(e.kind, a.length)
    elif e.kind == "null" and a.kind != "null":
        e = _nulls(a.kind, e.length)
    elif {a.kind, e.kind} == {"string", "datetime"}:
        a = (_parsed_time(a) or a) if a.kind == "string" else a
        e = (_parsed_time(e) or e) if e.kind == "string" else e
    if a.kind != e.kind:
        hint = f" (actual column holds {_KIND_NAMES[a.kind]}, expected {_KIND_NAMES[e.kind]})"
        a, e = _as_mixed(a, tol), _as_mixed(e, tol)
    if a.kind == "null":
        return _Pair(e_pos, a_pos, "null", np.zeros(a.length, np.int8), np.zeros(e.length, np.int8))
    if a.kind in ("string", "mixed"):
        codes, _ = pd.factorize(pd.concat([a.values, e.values], ignore_index=True))
        return _Pair(e_pos, a_pos, a.kind, codes[: a.length], codes[a.length :], hint=hint)
    return _Pair(e_pos, a_pos, a.kind, a.values, e.values, a.raw, e.raw, hint)


def _take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    return values if rows is None else values[rows]


def _exact(pair: _Pair, a_rows: np.ndarray | None, e_rows: np.ndarray | None) -> np.ndarray:
    a, e = _take(pair.a_keys, a_rows), _take(pair.e_keys, e_rows)
    if a.dtype == np.float64:  # rounded numbers: compare bits, so NaN (null) equals NaN
        return a.view(np.uint64) == e.view(np.uint64)
    return a == e


def _cells_equal(pair: _Pair, a_rows, e_rows, tol: _Tolerance) -> np.ndarray:
    if pair.kind != "number":
        return _exact(pair, a_rows, e_rows)
    return tol.close(
        _take(pair.a_raw, a_rows),
        _take(pair.e_raw, e_rows),
        _take(pair.a_keys, a_rows),
        _take(pair.e_keys, e_rows),
    )


# --- row comparison -------------------------------------------------------------------


@dataclass(eq=False)
class _Outcome:
    bad_a: np.ndarray  # positions of actual rows without a match, ascending
    bad_e: np.ndarray
    ordered: bool = False

    @property
    def passed(self) -> bool:
        return len(self.bad_a) == 0 and len(self.bad_e) == 0


_NO_ROWS = np.empty(0, dtype=np.intp)


def _compare_rows(
    pairs: list[_Pair], n_a: int, n_e: int, ordered: bool, tol: _Tolerance
) -> _Outcome:
    if ordered:
        return _compare_ordered(pairs, n_a, n_e, tol)
    return _compare_unordered(pairs, n_a, n_e, tol)


def _compare_ordered(pairs: list[_Pair], n_a: int, n_e: int, tol: _Tolerance) -> _Outcome:
    common = min(n_a, n_e)
    rows = None if n_a == n_e else np.arange(common)
    differs = np.zeros(common, dtype=bool)
    for pair in pairs:
        differs |= ~_cells_equal(pair, rows, rows, tol)
    bad = np.flatnonzero(differs)
    bad_a = np.concatenate([bad, np.arange(common, n_a)])
    return _Outcome(bad_a, np.concatenate([bad, np.arange(common, n_e)]), ordered=True)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place: every input bit moves every output bit."""
    h ^= h >> 30
    h *= 0xBF58476D1CE4E5B9
    h ^= h >> 27
    h *= 0x94D049BB133111EB
    h ^= h >> 31
    return h


def _as_u64(keys: np.ndarray) -> np.ndarray:
    return keys.view(np.uint64) if keys.dtype == np.float64 else keys.astype(np.uint64)


def _hash_rows(key_columns: list[np.ndarray], n: int) -> np.ndarray:
    h = np.full(n, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for keys in key_columns:
        h ^= _as_u64(keys)
        _mix(h)
    return h


def _surplus(own: np.ndarray, other: np.ndarray) -> np.ndarray:
    """For sorted hashes, mark the copies of a value beyond the other side's count of it."""
    if len(own) == 0:
        return np.zeros(0, dtype=bool)
    starts = np.flatnonzero(np.concatenate([[True], own[1:] != own[:-1]]))
    rank = np.arange(len(own)) - np.repeat(starts, np.diff(np.append(starts, len(own))))
    available = np.searchsorted(other, own, "right") - np.searchsorted(other, own, "left")
    return rank >= available


def _compare_unordered(pairs: list[_Pair], n_a: int, n_e: int, tol: _Tolerance) -> _Outcome:
    hash_a = _hash_rows([p.a_keys for p in pairs], n_a)
    hash_e = _hash_rows([p.e_keys for p in pairs], n_e)
    order_a, order_e = np.argsort(hash_a), np.argsort(hash_e)
    sorted_a, sorted_e = hash_a[order_a], hash_e[order_e]
    del hash_a, hash_e
    if n_a == n_e and np.array_equal(sorted_a, sorted_e):
        # Equal hashes: confirm on the keys themselves, so a hash collision cannot pass.
        agree = np.ones(n_a, dtype=bool)
        for pair in pairs:
            agree &= _exact(pair, order_a, order_e)
        if agree.all():
            return _Outcome(_NO_ROWS, _NO_ROWS)
        loose_a, loose_e = order_a[~agree], order_e[~agree]
    else:
        loose_a = order_a[_surplus(sorted_a, sorted_e)]
        loose_e = order_e[_surplus(sorted_e, sorted_a)]
    del order_a, order_e, sorted_a, sorted_e
    return _match_with_tolerance(pairs, loose_a, loose_e, n_a, n_e, tol)


def _match_with_tolerance(
    pairs: list[_Pair],
    loose_a: np.ndarray,
    loose_e: np.ndarray,
    n_a: int,
    n_e: int,
    tol: _Tolerance,
) -> _Outcome:
    """Decide the rows the exact path left unmatched, with the number tolerance."""
    numeric = [p for p in pairs if p.kind == "number"]
    if not numeric:
        return _Outcome(np.sort(loose_a), np.sort(loose_e))
    # Rows can only match within a group of equal non-number keys and equal null pattern.
    exact_a = [p.a_keys for p in pairs if p.kind != "number"] + [
        np.isnan(p.a_keys) for p in numeric
    ]
    exact_e = [p.e_keys for p in pairs if p.kind != "number"] + [
        np.isnan(p.e_keys) for p in numeric
    ]
    group_a, group_e = _hash_rows(exact_a, n_a), _hash_rows(exact_e, n_e)
    del exact_a, exact_e
    groups = _unique(np.concatenate([group_a[loose_a], group_e[loose_e]]))
    rows_a = _sorted_group_rows(group_a, groups, [p.a_raw for p in numeric])
    rows_e = _sorted_group_rows(group_e, groups, [p.e_raw for p in numeric])
    start_a, count_a = _group_spans(group_a[rows_a], groups)
    start_e, count_e = _group_spans(group_e[rows_e], groups)

    # Groups of equal size: pair the rows in sorted order (optimal for one number column).
    same_size = count_a == count_e
    in_same_a = np.repeat(same_size, count_a)
    in_same_e = np.repeat(same_size, count_e)
    paired_a, paired_e = rows_a[in_same_a], rows_e[in_same_e]
    agree = np.ones(len(paired_a), dtype=bool)
    for pair in pairs:
        agree &= _cells_equal(pair, paired_a, paired_e, tol)
    failing = _unique(np.concatenate([groups[~same_size], group_a[paired_a[~agree]]]))
    if len(failing) == 0:
        return _Outcome(_NO_ROWS, _NO_ROWS)

    # Failing groups that are small get an exact matching, so that with several number
    # columns a pairing that sorting missed is still found; the others keep the sorted
    # pairing's verdict (groups of unequal size fail whole).
    index = np.searchsorted(groups, failing)
    small = np.maximum(count_a, count_e)[index] <= _MATCHING_GROUP_ROWS
    to_match = index[small][:_MATCHING_GROUPS]
    rest = np.zeros(len(groups), dtype=bool)
    rest[index] = True
    rest[to_match] = False
    in_rest = np.repeat(rest[same_size], count_a[same_size]) & ~agree
    unequal = rest & ~same_size
    bad_a = [paired_a[in_rest], rows_a[np.repeat(unequal, count_a)]]
    bad_e = [paired_e[in_rest], rows_e[np.repeat(unequal, count_e)]]
    for g in to_match:
        unmatched_a, unmatched_e = _unmatched(
            pairs,
            rows_a[start_a[g] : start_a[g] + count_a[g]],
            rows_e[start_e[g] : start_e[g] + count_e[g]],
            tol,
        )
        bad_a.append(unmatched_a)
        bad_e.append(unmatched_e)
    return _Outcome(_unique(np.concatenate(bad_a)), _unique(np.concatenate(bad_e)))


def _sorted_group_rows(
    group: np.ndarray, groups: np.ndarray, numbers_: list[np.ndarray]
) -> np.ndarray:
    """Rows whose group is in `groups` (sorted), by group, then by each number column."""
    if len(groups) * 8 < len(group):  # few groups: searching a small set is cheap
        rows = np.flatnonzero(_member(group, groups))
        rows = rows[np.argsort(group[rows])]
    else:  # many: sort first, since sorted needles make searchsorted fast
        order = np.argsort(group)
        rows = order[_member(group[order], groups)]
    # Only rows sharing a group need the (slow) sort by their numbers.
    same = group[rows[1:]] == group[rows[:-1]]
    shared = np.concatenate([same, [False]]) | np.concatenate([[False], same])
    if shared.any():
        sub = rows[shared]
        sub = sub[np.lexsort([values[sub] for values in reversed(numbers_)] + [group[sub]])]
        rows[shared] = sub
    return rows


def _unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (numpy's hash-based unique is slow on random 64-bit keys)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _group_spans(sorted_group: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and length of each of `groups` (sorted) within a sorted array of group ids."""
    start = np.searchsorted(sorted_group, groups, "left")
    return start, np.searchsorted(sorted_group, groups, "right") - start


def _unmatched(pairs: list[_Pair], rows_a: np.ndarray, rows_e: np.ndarray, tol: _Tolerance):
    """Rows left over by a maximum matching of actual to expected rows (Kuhn's algorithm)."""
    n_a, n_e = len(rows_a), len(rows_e)
    grid_a, grid_e = np.tile(rows_a, n_e), np.repeat(rows_e, n_a)
    fits = np.ones(n_a * n_e, dtype=bool)
    for pair in pairs:
        fits &= _cells_equal(pair, grid_a, grid_e, tol)
    candidates = [np.flatnonzero(row) for row in fits.reshape(n_e, n_a)]
    owner = np.full(n_a, -1)  # expected row matched to each actual row

    def augment(i: int, seen: np.ndarray) -> bool:
        for j in candidates[i]:
            if not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(n_e):
        augment(i, np.zeros(n_a, dtype=bool))
    matched_e = np.zeros(n_e, dtype=bool)
    matched_e[owner[owner >= 0]] = True
    return rows_a[owner < 0], rows_e[~matched_e]


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
        return _failed(names, _missing_message(names[lacking], actual, by_values=True))
    outcome, pairs, note = first_failure
    return _verdict(outcome, pairs, actual, expected, tol, note + "; no assignment matches")


# --- reporting ------------------------------------------------------------------------


def _missing_message(name: str, actual: pd.DataFrame, *, by_values: bool) -> str:
    have = ", ".join(repr(str(c)) for c in actual.columns) or "none"
    reason = ": no actual column has that name or the same values" if by_values else ""
    return f"missing column {name!r}{reason} (actual columns: {have})"


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

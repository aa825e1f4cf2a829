"""Per-column canonicalisation for `compare_results`: tolerance, normalised columns, pairs."""

from __future__ import annotations

import decimal
import numbers
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

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

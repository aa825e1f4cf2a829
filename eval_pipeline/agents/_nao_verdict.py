"""The verdict nao's own data check gives a backend verification, so it can be shown beside ours.

A port of `check_dataframe` and `normalize_dataframe_numbers` of nao-core 0.3.29
(`nao_core/commands/test/runner.py` and `compare.py`): the verification's rows and the
reference's rows as frames, restricted to the expected columns, locale-formatted number
strings parsed, floats rounded to `decimals`, rows sorted, then equal, or close within
`rtol`/`atol`. Its messages are nao's ("match", "values differ", "row count: 2 vs 3"), so a
person comparing with `nao test` reads the same words.

One departure: nao sorts the rows with pandas, which cannot order a column that its number
parsing left half numbers and half text (`'100'` → 100.0 beside `'A7'`) and raises. Here
such a column is ordered by kind first (numbers, text, other values, nulls), then within
its kind, so the same rows in any order still compare equal.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from eval_pipeline.suite import Tolerance

__all__ = ["NaoVerdict", "nao_data_verdict"]

_CURRENCY_PREFIX = re.compile(r"^[\$€£¥₹]")
_US_NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?$")
_PLAIN_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_EU_NUMBER = re.compile(r"^-?[\d.]+,\d+$")
_EU_THOUSANDS = re.compile(r"^-?\d{1,3}(\.\d{3})+$")


@dataclass(frozen=True)
class NaoVerdict:
    """What `nao test` would conclude from the backend's verification alone."""

    passed: bool
    message: str


def nao_data_verdict(
    data: list[dict[str, Any]] | None,
    expected_data: list[dict[str, Any]],
    expected_columns: list[str],
    *,
    error: str | None = None,
    tolerance: Tolerance | None = None,
) -> NaoVerdict:
    """nao's data check of a verification (its `data`, `expectedData`, `expectedColumns`)."""
    tolerance = tolerance or Tolerance()
    if data is None:
        return NaoVerdict(False, error or "no data returned")
    actual, expected = pd.DataFrame(data), pd.DataFrame(expected_data)
    if actual.empty and expected.empty:
        return NaoVerdict(True, "both empty")
    if actual.empty:
        return NaoVerdict(False, "actual is empty")
    if expected.empty:
        return NaoVerdict(False, "expected is empty")
    if expected_columns:
        # A column named twice is compared once (pandas would give it two same-named columns).
        expected_columns = list(dict.fromkeys(expected_columns))
        missing = set(expected_columns) - set(actual.columns)
        if missing:
            return NaoVerdict(False, f"missing columns: {missing}")
        actual, expected = actual[expected_columns], expected[expected_columns]
    if len(actual) != len(expected):
        return NaoVerdict(False, f"row count: {len(actual)} vs {len(expected)}")
    actual, expected = (
        _rounded(_sorted(_numbers(frame)), tolerance.decimals) for frame in (actual, expected)
    )
    actual, expected = _in_row_order(actual), _in_row_order(expected)
    if actual.equals(expected):
        return NaoVerdict(True, "match")
    try:
        if all(_close(actual[c], expected[c], tolerance) for c in actual.columns):
            return NaoVerdict(True, "match (approximate)")
    except Exception:  # nao's own comparison falls through to "values differ" the same way
        pass
    return NaoVerdict(False, "values differ")


def _close(actual: pd.Series, expected: pd.Series, tolerance: Tolerance) -> bool:
    if pd.api.types.is_numeric_dtype(actual) and pd.api.types.is_numeric_dtype(expected):
        return bool(
            np.allclose(
                actual.to_numpy(),
                expected.to_numpy(),
                rtol=tolerance.rtol,
                atol=tolerance.atol,
                equal_nan=True,
            )
        )
    return bool(actual.equals(expected))


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    frame = pd.DataFrame(frame.reset_index(drop=True).infer_objects())
    return frame[sorted(frame.columns)]


# The order of kinds in a column of mixed values; nulls last, as pandas sorts them.
_NUMBER, _TEXT, _OTHER, _NULL = range(4)


def _in_row_order(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame`'s rows sorted by every column (in name order), whatever its values' types."""
    keys: dict[str, pd.Series] = {}
    for position, column in enumerate(frame.columns):
        series = frame[column]
        if series.dtype != object:
            keys[f"{position}"] = series
            continue
        kinds = series.map(_kind)
        keys[f"{position}:kind"] = kinds
        keys[f"{position}:number"] = pd.Series(
            [
                _as_float(v) if k == _NUMBER else math.nan
                for v, k in zip(series, kinds, strict=True)
            ],
            index=frame.index,
            dtype=float,
        )
        keys[f"{position}:text"] = pd.Series(
            [_as_text(v, k) for v, k in zip(series, kinds, strict=True)],
            index=frame.index,
            dtype=object,
        )
    order = pd.DataFrame(keys, index=frame.index).sort_values(by=list(keys), kind="stable")
    return frame.loc[order.index].reset_index(drop=True)


def _kind(value: Any) -> int:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _NULL
    if isinstance(value, (int, float, np.number)):  # bool too: True == 1, as pandas compares
        return _NUMBER
    return _TEXT if isinstance(value, str) else _OTHER


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past a float's range
        return math.inf if value > 0 else -math.inf


def _as_text(value: Any, kind: int) -> str:
    if kind == _TEXT:
        return value
    if kind == _OTHER:  # a JSON object or list: its text orders it
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return ""


def _rounded(frame: pd.DataFrame, decimals: int) -> pd.DataFrame:
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_float_dtype(series) or (
            pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_integer_dtype(series)
        ):
            frame[column] = series.round(decimals)
    return frame


def _numbers(frame: pd.DataFrame) -> pd.DataFrame:
    result = frame.copy()
    for column in result.columns:
        result[column] = result[column].map(_formatted_number)
    return result


def _formatted_number(value: Any) -> Any:
    """A locale-formatted number string (`$1,234.50`, `1.234,5`) as a float; else `value`."""
    if not isinstance(value, str) or not value.strip():
        return value
    cleaned = re.sub(r"[\s\u00a0\u202f]", "", _CURRENCY_PREFIX.sub("", value.strip()).strip())
    if not cleaned or cleaned in ("-", "+"):
        return value
    negative = cleaned.startswith("-")
    unsigned = cleaned[1:] if negative else cleaned
    unsigned = unsigned[1:] if unsigned.startswith("+") else unsigned
    if _US_NUMBER.fullmatch(unsigned):
        parsed = float(unsigned.replace(",", ""))
    elif _PLAIN_NUMBER.fullmatch(unsigned):
        parsed = float(unsigned)
    elif _EU_NUMBER.fullmatch(unsigned):
        parsed = float(unsigned.replace(".", "").replace(",", "."))
    elif _EU_THOUSANDS.fullmatch(unsigned):
        parsed = float(unsigned.replace(".", ""))
    else:
        return value
    return -parsed if negative else parsed

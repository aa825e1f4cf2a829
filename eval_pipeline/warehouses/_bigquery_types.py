"""BigQuery's result types as Arrow columns with DuckDB's type names: never a wrong value, text where a type has no equal.

The REST pages of a query's result arrive as the client's Python values (`google-cloud-bigquery`
reads BigQuery's JSON): NUMERIC and BIGNUMERIC as `Decimal`, DATETIME as a naive `datetime`,
TIMESTAMP as one in UTC, INTERVAL as a `relativedelta`, STRUCT as a dict, ARRAY as a list,
JSON as the parsed value. Each column becomes:

* NUMERIC: DECIMAL(38,9), which is exactly BigQuery's NUMERIC;
* BIGNUMERIC (76 digits, 38 after the point): DECIMAL(38,s) with the scale of the first
  page's values when they all fit one, else text; a later value that does not fit the type
  chosen fails the statement (`ValueDoesNotFit`) rather than be rounded;
* DATETIME: TIMESTAMP (no zone); TIMESTAMP: TIMESTAMP WITH TIME ZONE (UTC), kept apart;
* INTERVAL: DuckDB's INTERVAL (months, days, microseconds), as BigQuery keeps it;
* STRUCT, ARRAY, JSON, RANGE: their JSON text; GEOGRAPHY: its WKT text;
* INT64, FLOAT64, BOOL, STRING, BYTES, DATE, TIME: their own kind.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["ColumnPlan", "ValueDoesNotFit", "batch_of_columns", "plan_columns"]

#: Digits DuckDB's DECIMAL holds.
_MAX_DIGITS = 38
#: Room for BIGNUMERIC's 76 digits in decimal arithmetic (Python's default holds 28).
_WIDE = decimal.Context(prec=100)
_PLAIN: dict[str, tuple[pa.DataType, str]] = {
    "INTEGER": (pa.int64(), "BIGINT"),
    "INT64": (pa.int64(), "BIGINT"),
    "FLOAT": (pa.float64(), "DOUBLE"),
    "FLOAT64": (pa.float64(), "DOUBLE"),
    "BOOLEAN": (pa.bool_(), "BOOLEAN"),
    "BOOL": (pa.bool_(), "BOOLEAN"),
    "STRING": (pa.string(), "VARCHAR"),
    "BYTES": (pa.binary(), "BLOB"),
    "DATE": (pa.date32(), "DATE"),
    "TIME": (pa.time64("us"), "TIME"),
    "DATETIME": (pa.timestamp("us"), "TIMESTAMP"),
    "TIMESTAMP": (pa.timestamp("us", tz="UTC"), "TIMESTAMP WITH TIME ZONE"),
    "NUMERIC": (pa.decimal128(38, 9), "DECIMAL(38,9)"),
    "INTERVAL": (pa.month_day_nano_interval(), "INTERVAL"),
}
#: Kinds whose client values Arrow takes as they are (NUMERIC: BigQuery's own 38,9).
_AS_IS = frozenset(_PLAIN) - {"INTERVAL"}
#: Kinds kept as their JSON text (a nested value has no flat equal every engine shares).
_AS_JSON = frozenset({"RECORD", "STRUCT", "JSON", "RANGE"})


class ValueDoesNotFit(Exception):
    """A value of a later page does not fit the type its column was given from the first."""


@dataclass(frozen=True)
class ColumnPlan:
    """How one result column's values become an Arrow array."""

    name: str
    kind: str  # BigQuery's type name, "ARRAY" for a repeated field
    arrow: pa.DataType
    duckdb: str


def plan_columns(schema: Sequence[Any], first: Sequence[Sequence[Any]]) -> list[ColumnPlan]:
    """The column plans of a result whose schema is `schema` (the client's SchemaFields),
    BIGNUMERIC's scale read from the first page's columns (`first`, one list per column)."""
    plans = []
    for i, field in enumerate(schema):
        kind = "ARRAY" if field.mode == "REPEATED" else str(field.field_type).upper()
        if kind in _PLAIN:
            arrow, duck = _PLAIN[kind]
        elif kind in ("BIGNUMERIC", "BIGDECIMAL"):
            arrow, duck = _wide_decimal(list(first[i]) if i < len(first) else [])
        else:  # ARRAY, STRUCT, JSON, RANGE, GEOGRAPHY, any kind BigQuery adds later
            arrow, duck = pa.string(), "VARCHAR"
        plans.append(ColumnPlan(field.name, kind, arrow, duck))
    return plans


def _wide_decimal(values: list[Any]) -> tuple[pa.DataType, str]:
    digits_before, scale = 1, 0
    for value in values:
        if value is None:
            continue
        if not isinstance(value, decimal.Decimal) or not value.is_finite():
            return pa.string(), "VARCHAR"
        _, digits, exponent = value.as_tuple()
        after = max(0, -int(exponent))
        scale = max(scale, after)
        digits_before = max(digits_before, len(digits) - after)
    if digits_before + scale > _MAX_DIGITS:
        return pa.string(), "VARCHAR"
    return pa.decimal128(_MAX_DIGITS, scale), f"DECIMAL({_MAX_DIGITS},{scale})"


def batch_of_columns(
    plans: Sequence[ColumnPlan], columns: Sequence[Sequence[Any]]
) -> pa.RecordBatch:
    """One Arrow batch of `columns` (the client's values, one list per column) by `plans`.

    Raises:
        ValueDoesNotFit: a BIGNUMERIC value does not fit the DECIMAL its column was given.
    """
    arrays = []
    for i, plan in enumerate(plans):
        values = columns[i]  # the client's values, as Arrow takes them for most kinds
        if plan.kind not in _AS_IS:
            values = [_cell(plan, value) for value in values]
        try:
            arrays.append(pa.array(values, type=plan.arrow))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as error:
            raise ValueDoesNotFit(
                f"column {plan.name!r} ({plan.kind}) holds a value that does not fit "
                f"{plan.duckdb} ({error}); CAST it to STRING in the query to read it as text"
            ) from None
    return pa.RecordBatch.from_arrays(arrays, names=[p.name for p in plans])


def _cell(plan: ColumnPlan, value: Any) -> Any:
    if value is None:
        return None
    if plan.kind == "INTERVAL":
        return _interval(value)
    if plan.arrow == pa.string():
        if isinstance(value, str) and plan.kind not in _AS_JSON and plan.kind != "ARRAY":
            return value  # STRING, GEOGRAPHY's WKT
        if isinstance(value, str) and plan.kind == "JSON":
            return value  # read column by column, the client leaves JSON as its text
        if isinstance(value, decimal.Decimal):
            return str(value)  # a BIGNUMERIC kept as text
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    if isinstance(value, decimal.Decimal) and pa.types.is_decimal(plan.arrow):
        scale = plan.arrow.scale
        step = decimal.Decimal(1).scaleb(-scale)
        with decimal.localcontext(_WIDE):
            exact = value == value.quantize(step, rounding=decimal.ROUND_DOWN)
        if not exact:
            raise ValueDoesNotFit(
                f"column {plan.name!r} ({plan.kind}) holds {value}, which has more digits "
                f"after the point than {plan.duckdb}; CAST it to STRING in the query"
            )
    return value


def _interval(value: Any) -> tuple[int, int, int]:
    """A relativedelta (the client's INTERVAL) as Arrow's (months, days, nanoseconds)."""
    months = int(getattr(value, "years", 0)) * 12 + int(getattr(value, "months", 0))
    days = int(getattr(value, "days", 0))
    seconds = (
        int(getattr(value, "hours", 0)) * 3600
        + int(getattr(value, "minutes", 0)) * 60
        + int(getattr(value, "seconds", 0))
    )
    nanos = seconds * 1_000_000_000 + int(getattr(value, "microseconds", 0)) * 1000
    return months, days, nanos


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    return str(value)

"""Snowflake's result columns as Arrow types DuckDB would give: one type per column, decided from the result's description.

The connector types each Arrow batch by its own values (a NUMBER(38,0) column is int8 in a
batch of small numbers and decimal128 in the next), so every batch is cast to the type the
column's description says: NUMBER(p,0) up to 18 digits is BIGINT, any other NUMBER(p,s)
DECIMAL(p,s); FLOAT is DOUBLE; TIMESTAMP_NTZ is TIMESTAMP, TIMESTAMP_LTZ and TIMESTAMP_TZ
are TIMESTAMP WITH TIME ZONE (the instant, in UTC: a TIMESTAMP_TZ's offset is not kept, as
DuckDB keeps none); VARIANT, OBJECT and ARRAY are their JSON text. A column of any other
type (GEOGRAPHY, VECTOR, an interval, a structured type), and a value that cannot be cast,
is text: never a wrong value.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["arrow_type_of", "conform_batch"]

#: The connector's type codes (`snowflake.connector.constants.FIELD_TYPES`).
_FIXED, _REAL, _TEXT, _DATE, _TIMESTAMP = 0, 1, 2, 3, 4
_VARIANT, _TIMESTAMP_LTZ, _TIMESTAMP_TZ, _TIMESTAMP_NTZ = 5, 6, 7, 8
_OBJECT, _ARRAY, _BINARY, _TIME, _BOOLEAN = 9, 10, 11, 12, 13
#: The most digits an int64 holds whatever they are (NUMBER(18,0)).
_INT64_DIGITS = 18


def arrow_type_of(type_code: int, precision: int | None, scale: int | None) -> pa.DataType:
    """The Arrow type a Snowflake column's values become (`cursor.description`'s type code,
    precision and scale)."""
    if type_code == _FIXED:
        digits = max(1, min(int(precision or 38), 38))
        places = max(0, min(int(scale or 0), digits))
        if places == 0 and digits <= _INT64_DIGITS:
            return pa.int64()
        return pa.decimal128(digits, places)
    if type_code == _REAL:
        return pa.float64()
    if type_code == _DATE:
        return pa.date32()
    if type_code in (_TIMESTAMP, _TIMESTAMP_NTZ):
        return pa.timestamp("us")
    if type_code in (_TIMESTAMP_LTZ, _TIMESTAMP_TZ):
        return pa.timestamp("us", tz="UTC")
    if type_code == _BINARY:
        return pa.binary()
    if type_code == _TIME:
        return pa.time64("us")
    if type_code == _BOOLEAN:
        return pa.bool_()
    return pa.string()  # TEXT, VARIANT, OBJECT, ARRAY and every other type: as text


def conform_batch(batch: pa.RecordBatch | pa.Table, types: list[pa.DataType]) -> pa.RecordBatch:
    """`batch` with each column of its declared type; a column that will not cast is the
    text of each value (JSON for lists, maps and structs)."""
    columns = []
    for column, kind in zip(batch.columns, types, strict=True):
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        columns.append(_conformed(column, kind))
    return pa.RecordBatch.from_arrays(columns, names=list(batch.schema.names))


def _conformed(column: pa.Array, kind: pa.DataType) -> pa.Array:
    if column.type == kind:
        return column
    if pa.types.is_string(kind) and not (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
    ):
        return _as_text(column)
    try:
        return pc.cast(column, kind)  # safe: an overflow or a lost digit fails, never rounds
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _as_text(column)


def _as_text(column: pa.Array) -> pa.Array:
    return pa.array([None if v is None else _text(v) for v in column.to_pylist()], pa.string())


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.time | dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return str(value)

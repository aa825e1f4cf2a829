"""Server results as Arrow batches with the types DuckDB would give: NUMERIC decoded, rows columnised."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_PG_TYPE = b"POSTGRESQL:type"
_PG_TYPMOD = b"POSTGRESQL:typmod"
_NOT_INTEGRAL = (".", "e", "E", "N", "I")  # a fraction, an exponent, NaN, Infinity


def normalise_postgres(batch: pa.RecordBatch) -> pa.RecordBatch:
    """ADBC's PostgreSQL batch with NUMERIC as numbers rather than text.

    The driver hands NUMERIC over as an opaque text column. NUMERIC(p, s) with p ≤ 38 becomes
    decimal128(p, s) — what DuckDB gives for DECIMAL; an unconstrained NUMERIC (SUM of
    BIGINT, AVG, ...) becomes int64 when every value is whole (DuckDB's HUGEINT sums), else
    float64.
    """
    columns, fields, changed = [], [], False
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if (field.metadata or {}).get(_PG_TYPE) == b"numeric":
            column = _numeric(column, (field.metadata or {}).get(_PG_TYPMOD))
            field = pa.field(field.name, column.type, metadata=field.metadata)
            changed = True
        columns.append(column)
        fields.append(field)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields)) if changed else batch


def _numeric(column: pa.Array, typmod: bytes | None) -> pa.Array:
    text = column.storage if isinstance(column, pa.ExtensionArray) else column
    modifier = int(typmod) if typmod else -1
    if modifier >= 4:
        precision, scale = (modifier - 4) >> 16, (modifier - 4) & 0xFFFF
        if precision <= 38:
            try:
                return pc.cast(text, pa.decimal128(precision, scale))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass  # NaN is a valid NUMERIC but no decimal128
    values = [v for v in text.to_pylist() if v is not None]
    if not any(mark in v for v in values for mark in _NOT_INTEGRAL):
        try:
            return pc.cast(text, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return pc.cast(text, pa.float64())


def rows_to_batch(names: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
    """A batch from driver rows (PyMySQL), each column typed by Arrow's inference.

    Decimals, dates and datetimes keep their types; a column Arrow cannot type (mixed
    values) becomes text rather than failing the query.
    """
    arrays = []
    for i in range(len(names)):
        values = [row[i] for row in rows]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.RecordBatch.from_arrays(arrays, names=list(names))


def duckdb_type_name(kind: pa.DataType) -> str:
    """The DuckDB type of an Arrow type, so a server's result loads into DuckDB (answer
    extraction creates typed tables of empty results) exactly as a DuckDB result would."""
    if pa.types.is_decimal(kind):
        return f"DECIMAL({min(kind.precision, 38)},{kind.scale})"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP WITH TIME ZONE" if kind.tz else "TIMESTAMP"
    for test, name in _DUCKDB_NAMES:
        if test(kind):
            return name
    return "VARCHAR"


_DUCKDB_NAMES = (
    (pa.types.is_boolean, "BOOLEAN"),
    (pa.types.is_int8, "TINYINT"),
    (pa.types.is_int16, "SMALLINT"),
    (pa.types.is_int32, "INTEGER"),
    (pa.types.is_int64, "BIGINT"),
    (pa.types.is_unsigned_integer, "UBIGINT"),
    (pa.types.is_float32, "FLOAT"),
    (pa.types.is_floating, "DOUBLE"),
    (pa.types.is_date, "DATE"),
    (pa.types.is_time, "TIME"),
    (pa.types.is_duration, "INTERVAL"),
    (pa.types.is_binary, "BLOB"),
    (pa.types.is_large_binary, "BLOB"),
)


def mysql_decimal_is_wide(length: int | None, scale: int | None) -> bool:
    """Whether a MySQL DECIMAL column has more digits than DuckDB's DECIMAL (38): PyMySQL's
    `precision` is the column's length, which counts a sign and a decimal point."""
    return int(length or 0) - (1 if scale else 0) - 1 > 38


def mysql_arrow_type(type_code: int, precision: int | None, scale: int | None) -> pa.DataType:
    """The Arrow type the values of a MySQL column type become (`_mysql_rows.value_fixers`
    included): TIME is its text (PyMySQL gives a timedelta), BIT its number, a DECIMAL of
    more digits than DuckDB's DECIMAL holds a float."""
    from pymysql.constants import FIELD_TYPE as F

    if type_code in (F.DECIMAL, F.NEWDECIMAL):
        if mysql_decimal_is_wide(precision, scale):
            return pa.float64()
        digits = max(1, min(int(precision or 38), 38))
        return pa.decimal128(digits, max(0, min(int(scale or 0), digits)))
    if type_code == F.BIT:
        return pa.uint64()
    if type_code in (F.TINY, F.SHORT, F.LONG, F.INT24, F.LONGLONG, F.YEAR):
        return pa.int64()
    if type_code in (F.FLOAT, F.DOUBLE):
        return pa.float64()
    if type_code in (F.DATE, F.NEWDATE):
        return pa.date32()
    if type_code in (F.DATETIME, F.TIMESTAMP):
        return pa.timestamp("us")
    return pa.string()

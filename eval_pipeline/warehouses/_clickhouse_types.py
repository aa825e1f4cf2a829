"""ClickHouse result blocks as Arrow batches with DuckDB's types: what has no faithful Arrow type is text, never a wrong value.

clickhouse-driver reads a block's columns as NumPy arrays and Arrow buffers (its `use_numpy`
reads); its own Arrow mapping (`clickhouse_driver.arrow.mapping`) types the plain columns:
integers (UInt64 as DuckDB's UBIGINT, never wrapped), floats, Decimal up to 38 digits,
Date, DateTime and DateTime64 (with their zone when the column names one), String, Enum,
Bool, UUID and IP addresses as text; Nullable and LowCardinality as their inner type. The
rest becomes text here, as ClickHouse would print it in JSON: Array, Tuple, Map, Nested,
JSON, Variant and Dynamic as JSON text; Int128/UInt128/Int256/UInt256 and Decimal of more
than 38 digits (past DuckDB's DECIMAL and Arrow's decimal128) as their digits; any type the
mapping does not know as its value's text.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

__all__ = ["CLICKHOUSE_TYPE", "arrow_batches", "bare_type", "needs_python_values"]

#: The Arrow field metadata key holding the column's ClickHouse type.
CLICKHOUSE_TYPE = b"clickhouse_type"
_NESTED = ("Array(", "Tuple(", "Map(", "Nested(", "JSON", "Object(", "Variant(", "Dynamic")
_WIDE_INTEGERS = frozenset({"Int128", "UInt128", "Int256", "UInt256"})


def bare_type(spec: str) -> str:
    """The type inside Nullable(...) and LowCardinality(...) wrappers."""
    spec = spec.strip()
    for wrapper in ("Nullable(", "LowCardinality("):
        while spec.startswith(wrapper) and spec.endswith(")"):
            spec = spec[len(wrapper) : -1].strip()
    return spec


def needs_python_values(specs: list[str]) -> bool:
    """Whether a result of these column types must be read as Python values, not NumPy and
    Arrow buffers: the driver's NumPy reads of a Tuple hand its String parts over as raw
    buffers no value can be read from, and the nested types are turned to text here anyway."""
    return any(bare_type(spec).startswith(_NESTED) for spec in specs)


def arrow_batches(blocks: Iterator[Any]) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and the batches of clickhouse-driver's data `blocks` (the first one, the
    header, holds no rows but the columns' names and types)."""
    from clickhouse_driver.arrow.convert import _column_to_array
    from clickhouse_driver.arrow.mapping import get_type_and_converter

    header = next(blocks, None)
    if header is None:
        return pa.schema([]), iter(())
    columns = header.columns_with_types
    plans = [_plan(spec, get_type_and_converter) for _, spec in columns]
    schema = pa.schema(
        [
            pa.field(name, kind, metadata={CLICKHOUSE_TYPE: spec.encode()})
            for (name, spec), (kind, _, _) in zip(columns, plans, strict=True)
        ]
    )

    def batches() -> Iterator[pa.RecordBatch]:
        if header.num_rows:
            yield _batch(header, schema, plans, _column_to_array)
        for block in blocks:
            if block.num_rows:
                yield _batch(block, schema, plans, _column_to_array)

    return schema, batches()


def _plan(spec: str, mapping: Any) -> tuple[pa.DataType, Any, bool]:
    """(Arrow type, the driver's per-value converter, whether the values are turned to
    text here) for a column of ClickHouse type `spec`."""
    bare = bare_type(spec)
    if bare.startswith(_NESTED) or bare.startswith("AggregateFunction("):
        return pa.string(), _json_text, True
    if bare in _WIDE_INTEGERS:
        return pa.string(), str, True
    if bare.startswith("Decimal") and _decimal_digits(bare) > 38:
        return pa.string(), _decimal_text, True
    kind, converter = mapping(spec)
    if kind is None or not isinstance(kind, pa.DataType):
        return pa.string(), _plain_text, True
    return kind, converter, False


def _batch(block: Any, schema: pa.Schema, plans: list, to_array: Any) -> pa.RecordBatch:
    arrays = []
    for column, (kind, converter, as_text) in zip(block.get_columns(), plans, strict=True):
        if as_text:
            values = [None if _is_null(v) else converter(v) for v in _python_values(column)]
            arrays.append(pa.array(values, type=pa.string()))
        else:
            arrays.append(to_array(column, kind, converter))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _python_values(column: Any) -> list[Any]:
    """A column read by the driver (a list, a tuple, a NumPy or masked array) as values,
    a NULL as None."""
    import numpy as np

    if isinstance(column, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(column)
        return [None if m else v for v, m in zip(column.data.tolist(), mask, strict=True)]
    if isinstance(column, np.ndarray):
        return column.tolist()
    return list(column)


def _is_null(value: Any) -> bool:
    return value is None


def _decimal_digits(spec: str) -> int:
    """The precision of Decimal(P, S), Decimal32/64/128/256(S)."""
    name, _, arguments = spec.partition("(")
    fixed = {"Decimal32": 9, "Decimal64": 18, "Decimal128": 38, "Decimal256": 76}
    if name in fixed:
        return fixed[name]
    try:
        return int(arguments.split(",")[0])
    except ValueError:
        return 76


def _decimal_text(value: Any) -> str:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _plain_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _json_text(value: Any) -> str:
    """A nested value as JSON (a Tuple as an array, a Map as an object), its scalars as
    JSON numbers, strings and null; what JSON has no type for as its text."""
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(", ", ": "))


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        # Past 2**53 a JSON reader's double would round it: its digits as text instead.
        return value if abs(value) <= 2**53 else str(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.decode("utf-8", errors="replace")
    return str(value)

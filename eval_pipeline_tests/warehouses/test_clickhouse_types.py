"""Today's ClickHouse types, which the tests' 18.16 server lacks, as data or text: chdb (ClickHouse in this process) encodes them, clickhouse-driver decodes them.

chdb writes a result in ClickHouse's Native format, the blocks the server sends over the
native protocol (without the protocol's block header); the driver's own block reader decodes
them as it decodes a server's, with the same reading settings the session uses (NumPy and
Arrow buffers, or Python values when a column is nested), and `arrow_batches` turns them into
what the sandbox keeps. So DateTime64, Map, Int128/UInt256, Decimal256, Bool, Date32, UUID
and IPv4 are checked as the current server encodes them, not as this test assumes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from eval_pipeline.warehouses._arrow import duckdb_type_name  # the unit itself: type names
from eval_pipeline.warehouses._clickhouse_types import (  # the unit itself: chdb's newer types
    arrow_batches,
    needs_python_values,
)

chdb = pytest.importorskip("chdb", reason="chdb is not installed (pip install chdb)")
pytest.importorskip("clickhouse_driver", reason="pip install 'eval-pipeline[clickhouse]'")


def _blocks(sql: str) -> Iterator[Any]:
    """The header block (names and types, no rows), then `sql`'s rows as one block, read as
    a session reads a server's."""
    from clickhouse_driver.block import ColumnOrientedBlock
    from clickhouse_driver.bufferedreader import CompressedBufferedReader
    from clickhouse_driver.connection import ServerInfo
    from clickhouse_driver.context import Context
    from clickhouse_driver.streams.native import BlockInputStream

    context = Context()
    # Revision 0: blocks without the protocol's block info, as the Native format writes them.
    context.server_info = ServerInfo("ClickHouse", 26, 9, 0, 0, "UTC", "chdb", 0)
    context.settings = {}
    context.client_settings = {"use_numpy": True, "use_arrow": True, "strings_as_bytes": False}
    described = chdb.query(f"DESCRIBE ({sql})", "TabSeparatedRaw").bytes().decode()
    columns = [tuple(line.split("\t")[:2]) for line in described.splitlines()]
    yield ColumnOrientedBlock(columns_with_types=columns, data=[[] for _ in columns])
    if needs_python_values([kind for _, kind in columns]):
        context.client_settings = {**context.client_settings, "use_numpy": False}
    chunks = [chdb.query(sql, "Native").bytes()]
    reader = CompressedBufferedReader(lambda: chunks.pop(0) if chunks else b"", 1 << 20)
    yield BlockInputStream(reader, context).read()


def _read(sql: str) -> dict[str, tuple[str, Any]]:
    """Column name → (DuckDB type, the value of the first row)."""
    schema, batches = arrow_batches(_blocks(sql))
    table = pa.Table.from_batches(list(batches), schema=schema)
    return {
        field.name: (duckdb_type_name(field.type), column.to_pylist()[0])
        for field, column in zip(table.schema, table.columns, strict=True)
    }


def test_plain_types_keep_their_values_and_wide_ones_are_their_digits():
    read = _read(
        "SELECT toDateTime64('2024-03-01 09:30:05.123', 3, 'UTC') AS dt64_utc, "
        "toDateTime64('2024-03-01 09:30:05.123456', 6) AS dt64, "
        "toUInt64(18446744073709551615) AS u64, "
        "toInt128('-170141183460469231731687303715884105728') AS i128, "
        "toUInt256('115792089237316195423570985008687907853269984665640564039457584007913129639935') AS u256, "
        "toDecimal128('12345678901234567890.12345678', 8) AS d128, "
        "toDecimal256('1234567890123456789012345678901234567890.123', 3) AS d256, "
        "true AS b, toLowCardinality('lc') AS lc, CAST(NULL, 'Nullable(Int32)') AS n, "
        "toUUID('61f0c404-5cb3-11e7-907b-a6006ad3dba0') AS uuid, toIPv4('1.2.3.4') AS ip, "
        "CAST('x', 'Enum8(\\'x\\' = 1)') AS e, toDate32('1900-01-01') AS d32"
    )
    assert read == {
        "dt64_utc": (
            "TIMESTAMP WITH TIME ZONE",
            dt.datetime(2024, 3, 1, 9, 30, 5, 123000, tzinfo=dt.UTC),
        ),
        "dt64": ("TIMESTAMP", dt.datetime(2024, 3, 1, 9, 30, 5, 123456)),
        "u64": ("UBIGINT", 2**64 - 1),  # never wrapped to -1
        "i128": ("VARCHAR", str(-(2**127))),
        "u256": ("VARCHAR", str(2**256 - 1)),
        "d128": ("DECIMAL(38,8)", Decimal("12345678901234567890.12345678")),
        "d256": ("VARCHAR", "1234567890123456789012345678901234567890.123"),
        "b": ("BOOLEAN", True),
        "lc": ("VARCHAR", "lc"),
        "n": ("INTEGER", None),
        "uuid": ("VARCHAR", "61f0c404-5cb3-11e7-907b-a6006ad3dba0"),
        "ip": ("VARCHAR", "1.2.3.4"),
        "e": ("VARCHAR", "x"),
        "d32": ("DATE", dt.date(1900, 1, 1)),
    }


def test_array_tuple_and_map_are_json_text_beside_plain_columns():
    read = _read(
        "SELECT map('a', 1, 'b', 2) AS m, [[1, NULL], []] AS arr, tuple(1, 'x', 2.5) AS tup, "
        "map('k', [toDecimal64('1.10', 2)]) AS nested, "
        "[toUInt64(18446744073709551615)] AS big, "
        "toDateTime64('2024-03-01 09:30:05.123', 3, 'UTC') AS at, 'é' AS s"
    )
    assert {name: kind for name, (kind, _) in read.items()} == {
        "m": "VARCHAR",
        "arr": "VARCHAR",
        "tup": "VARCHAR",
        "nested": "VARCHAR",
        "big": "VARCHAR",
        "at": "TIMESTAMP WITH TIME ZONE",
        "s": "VARCHAR",
    }
    assert json.loads(read["m"][1]) == {"a": 1, "b": 2}
    assert json.loads(read["arr"][1]) == [[1, None], []]
    assert json.loads(read["tup"][1]) == [1, "x", 2.5]
    (amount,) = json.loads(read["nested"][1])["k"]
    assert Decimal(amount) == Decimal("1.10")  # a decimal's digits, never a float's
    # Past 2**53 a JSON number would be rounded by whoever reads it: its digits instead.
    assert json.loads(read["big"][1]) == ["18446744073709551615"]
    assert read["at"][1] == dt.datetime(2024, 3, 1, 9, 30, 5, 123000, tzinfo=dt.UTC)
    assert read["s"][1] == "é"

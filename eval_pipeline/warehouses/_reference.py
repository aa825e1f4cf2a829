"""Reference SQL run on a test's warehouse, read-only and time-limited, into a typed DataFrame."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from eval_pipeline.warehouses._connection import WarehouseConnection

__all__ = ["run_reference"]


def run_reference(
    connection: WarehouseConnection, sql: str, *, timeout_s: float = 300.0
) -> pd.DataFrame:
    """The result of `sql` as a DataFrame whose types survive the trip from the engine.

    DATE → `datetime.date` objects, TIMESTAMP → datetime64, TIMESTAMP WITH TIME ZONE →
    datetime64 in UTC, DECIMAL/NUMERIC → `Decimal` objects, BOOLEAN → bool (MariaDB: 0/1,
    it has no boolean type), NULL → None/NaN/NaT — what the comparison rules expect.

    Raises:
        StatementTimeout: the server stopped it after `timeout_s`.
        StatementFailed: the server's error (syntax, unknown table, a write refused).
    """
    connection.begin_read_only(timeout_s)
    try:
        stream = connection.stream(sql)
        batches = list(stream.batches)
    finally:
        connection.end()
    if not batches:
        return pd.DataFrame({name: pd.Series([], dtype=object) for name in stream.columns})
    # Batches typed by inference (MySQL) may disagree, e.g. a first batch of only NULLs.
    table = pa.concat_tables(
        [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
    )
    frame = table.to_pandas(date_as_object=True, types_mapper=None)
    frame.columns = stream.columns
    return frame

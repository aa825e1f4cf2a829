"""Fetching a query's rows within row, byte and cell caps: Arrow batches are measured before any value becomes Python."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.sandbox._sandbox_errors import QueryTimeout
from eval_pipeline.sandbox._sql_result import to_json_safe

__all__ = ["FetchCaps", "FetchedRows", "fetch_capped", "fetch_capped_batches"]

#: Rows per Arrow batch: small enough that one batch of wide rows stays a few MB.
BATCH_ROWS = 256


@dataclass(frozen=True)
class FetchCaps:
    """How much of a result is kept. See `SandboxLimits` for the meaning of each cap."""

    max_rows: int
    max_bytes: int
    max_cell_bytes: int
    deadline: float  # time.monotonic() past which fetching stops with a timeout
    timeout_s: float  # the time limit the deadline stands for, as the timeout names it


@dataclass
class FetchedRows:
    """The rows kept (JSON-safe values) and what was cut to keep them within the caps."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False  # rows were left out (row or byte cap)
    bytes_capped: bool = False  # ... because of the byte cap
    cut_cells: int = 0

    def note(self, caps: FetchCaps) -> str | None:
        """What was cut and which limit did it, for the model and the store; None if nothing."""
        parts = []
        if self.bytes_capped:
            parts.append(
                f"rows after the first {len(self.rows):,} were dropped: the result passed "
                f"{caps.max_bytes:,} bytes (limits.query_max_bytes)"
            )
        if self.cut_cells:
            parts.append(
                f"{self.cut_cells:,} cell(s) over {caps.max_cell_bytes:,} bytes were cut "
                "(limits.query_cell_max_bytes)"
            )
        return "; ".join(parts) or None


def fetch_capped(
    relation: duckdb.DuckDBPyRelation, caps: FetchCaps, converter: duckdb.DuckDBPyConnection
) -> FetchedRows:
    """Stream `relation` in Arrow batches and keep rows until a cap is reached.

    See `fetch_capped_batches`, which does the keeping.
    """
    return fetch_capped_batches(relation.to_arrow_reader(BATCH_ROWS), caps, converter)


def fetch_capped_batches(
    batches: Iterable[pa.RecordBatch], caps: FetchCaps, converter: duckdb.DuckDBPyConnection
) -> FetchedRows:
    """Keep rows of Arrow `batches` (from DuckDB or a server warehouse) until a cap is reached.

    Cells are measured in Arrow (bytes of a text, all buffers of a list or struct), and an
    oversized one is replaced before conversion, so a single 800 MB list never becomes
    Python objects. Kept rows are converted by DuckDB itself (`converter`, a plain in-memory
    connection scanning the Arrow batch), so values are exactly what `fetchall` gives.

    Raises:
        QueryTimeout: `caps.deadline` passed between two batches.
    """
    fetched = FetchedRows()
    used = 0
    for batch in _chunks(batches):
        if time.monotonic() > caps.deadline:
            raise QueryTimeout.after(caps.timeout_s)
        room = caps.max_rows + 1 - len(fetched.rows)
        batch = batch.slice(0, room)
        columns, sizes, cut = _cut_cells(batch, caps.max_cell_bytes)
        fetched.cut_cells += len(cut)
        keep = batch.num_rows
        for i in range(batch.num_rows):
            row_bytes = sum(size[i] for size in sizes)
            if used + row_bytes > caps.max_bytes:
                keep = i
                fetched.truncated = fetched.bytes_capped = True
                break
            used += row_bytes
        kept = pa.RecordBatch.from_arrays(
            [column.slice(0, keep) for column in columns], names=batch.schema.names
        )
        rows = _python_rows(kept, converter) if keep else []
        for i, row in enumerate(rows):
            values = [to_json_safe(value) for value in row]
            for (r, c), marker in cut.items():
                if r == i:
                    values[c] = marker
            fetched.rows.append(tuple(values))
        fetched.cut_cells -= sum(1 for (r, _) in cut if r >= keep)
        if fetched.bytes_capped or len(fetched.rows) > caps.max_rows:
            break
    if len(fetched.rows) > caps.max_rows:
        fetched.rows = fetched.rows[: caps.max_rows]
        fetched.truncated = True
    return fetched


def _python_rows(
    batch: pa.RecordBatch, converter: duckdb.DuckDBPyConnection
) -> list[tuple[Any, ...]]:
    """The batch's rows as Python values, as DuckDB's `fetchall` of it gives them.

    Columns of plain types (numbers, text, dates: what nearly every answer holds) are
    converted by Arrow itself, which gives the same values at a fraction of the cost of a
    DuckDB query over the batch; any other type (timestamps with a zone, intervals, lists,
    structs, enums...) makes DuckDB convert the whole batch.
    """
    if batch.num_columns and all(_arrow_converts_alike(c.type) for c in batch.columns):
        return list(zip(*(column.to_pylist() for column in batch.columns), strict=True))
    return converter.from_arrow(pa.Table.from_batches([batch])).fetchall()


def _arrow_converts_alike(kind: pa.DataType) -> bool:
    """Whether Arrow's Python value of this type is DuckDB's (`to_pylist` == `fetchall`)."""
    return (
        pa.types.is_boolean(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_float32(kind)
        or pa.types.is_float64(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_null(kind)
    )


def _chunks(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The batches in slices of at most BATCH_ROWS: a server's batches may hold megabytes."""
    for batch in batches:
        for start in range(0, batch.num_rows, BATCH_ROWS):
            yield batch.slice(start, BATCH_ROWS)


def _cut_cells(
    batch: pa.RecordBatch, max_cell_bytes: int
) -> tuple[list[pa.Array], list[list[int]], dict[tuple[int, int], str]]:
    """The batch's columns with oversized cells nulled, each cell's size in bytes (after the
    cut), and the marker text replacing each cut cell, by (row, column)."""
    columns: list[pa.Array] = []
    sizes: list[list[int]] = []
    cut: dict[tuple[int, int], str] = {}
    for c, column in enumerate(batch.columns):
        measured = _sizes(column)
        if max(measured, default=0) <= max_cell_bytes:
            columns.append(column)
            sizes.append(measured)
            continue
        over = [size > max_cell_bytes for size in measured]
        for r, is_over in enumerate(over):
            if is_over:
                marker = _marker(column.slice(r, 1), measured[r], max_cell_bytes)
                cut[(r, c)] = marker
                measured[r] = len(marker.encode())
        columns.append(pc.if_else(pa.array(over), pa.nulls(len(column), column.type), column))
        sizes.append(measured)
    return columns, sizes, cut


def _sizes(column: pa.Array) -> list[int]:
    kind = column.type
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        return [n or 0 for n in pc.binary_length(column).to_pylist()]
    try:
        width = max(1, kind.bit_width // 8)
    except ValueError:  # variable width: nested, views, extension types
        return [column.slice(i, 1).nbytes for i in range(len(column))]
    return [width] * len(column)


def _marker(cell: pa.Array, size: int, limit: int) -> str:
    note = f"[cut: {size:,} bytes, over limits.query_cell_max_bytes of {limit:,}]"
    kind = cell.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        # Code points, then bytes: a prefix that fits, whatever the characters.
        head = pc.utf8_slice_codeunits(cell, 0, limit).to_pylist()[0] or ""
        head = head.encode()[: max(0, limit - len(note) - 4)].decode(errors="ignore")
        return f"{head}… {note}"
    return f"{note} ({kind})"

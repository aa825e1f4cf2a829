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
from eval_pipeline.warehouses import SERVER_SIZE, SERVER_TEXT

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

    def rows_cut_at_budget(self) -> None:
        """The rows after these were left out for passing the byte cap."""
        self.truncated = self.bytes_capped = True

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
    relation: duckdb.DuckDBPyRelation,
    caps: FetchCaps,
    converter: duckdb.DuckDBPyConnection,
    *,
    server_cells: bool = False,
) -> FetchedRows:
    """Stream `relation` in Arrow batches and keep rows until a cap is reached.

    See `fetch_capped_batches`, which does the keeping.
    """
    reader = relation.to_arrow_reader(BATCH_ROWS)
    return fetch_capped_batches(reader, caps, converter, server_cells=server_cells)


def fetch_capped_batches(
    batches: Iterable[pa.RecordBatch],
    caps: FetchCaps,
    converter: duckdb.DuckDBPyConnection,
    *,
    server_cells: bool = False,
) -> FetchedRows:
    """Keep rows of Arrow `batches` (from DuckDB or a server warehouse) until a cap is reached.

    Cells are measured in Arrow (bytes of a text, all buffers of a list or struct), and an
    oversized one is replaced before conversion, so a single 800 MB list never becomes
    Python objects. Kept rows are converted by DuckDB itself (`converter`, a plain in-memory
    connection scanning the Arrow batch), so values are exactly what `fetchall` gives.

    With `server_cells`, each batch ends with the server's SERVER_TEXT and SERVER_SIZE
    columns (`warehouses.Stream`): a cell the server cut is marked as one cut here, a value
    it sent as text is that text, and a row whose cells it withheld for passing the byte
    budget ends the result as the byte cap would.

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
        server = _ServerCells.split(batch, caps.max_cell_bytes) if server_cells else None
        if server is not None:
            batch = server.batch
        columns, sizes, cut = _cut_cells(batch, caps.max_cell_bytes, server)
        fetched.cut_cells += sum(1 for marker in cut.values() if marker.counted)
        keep = batch.num_rows
        for i in range(batch.num_rows):
            row_bytes = sum(size[i] for size in sizes)
            if used + row_bytes > caps.max_bytes or (server and i in server.over_budget):
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
                    values[c] = marker.text
            fetched.rows.append(tuple(values))
        fetched.cut_cells -= sum(
            1 for (r, _), marker in cut.items() if r >= keep and marker.counted
        )
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


@dataclass(frozen=True)
class _Replacement:
    """The text that stands for a cell: a cut marker (`counted` as a cut cell) or a value the
    server sent as its own text."""

    text: str
    counted: bool = True


@dataclass(frozen=True)
class _ServerCells:
    """A server batch's cells withheld by the server, split off its trailing columns."""

    batch: pa.RecordBatch  # the result's own columns
    texts: dict[tuple[int, int], str]  # (row, column) → the server's text for the cell
    sizes: dict[tuple[int, int], int]  # (row, column) → full size of a cell the server cut
    over_budget: frozenset[int]  # rows whose cells were withheld for the row's size

    @classmethod
    def split(cls, batch: pa.RecordBatch, max_cell_bytes: int) -> _ServerCells:
        count = batch.num_columns - 2
        texts, sizes = {}, {}
        for name, found in ((SERVER_TEXT, texts), (SERVER_SIZE, sizes)):
            for r, entries in enumerate(batch.column(name).to_pylist()):
                found.update({(r, c): v for c, v in enumerate(entries or ()) if v is not None})
        # A cell within the cell cap was withheld only because its row passed the budget.
        over = frozenset(r for (r, _), size in sizes.items() if size <= max_cell_bytes)
        own = pa.RecordBatch.from_arrays(batch.columns[:count], schema=_first(batch, count))
        return cls(own, texts, sizes, over)


def _first(batch: pa.RecordBatch, count: int) -> pa.Schema:
    return pa.schema([batch.schema.field(i) for i in range(count)])


def _cut_cells(
    batch: pa.RecordBatch, max_cell_bytes: int, server: _ServerCells | None = None
) -> tuple[list[pa.Array], list[list[int]], dict[tuple[int, int], _Replacement]]:
    """The batch's columns with oversized cells nulled, each cell's size in bytes (after the
    cut), and the text replacing each cut cell (or each value the server sent as text), by
    (row, column)."""
    columns: list[pa.Array] = []
    sizes: list[list[int]] = []
    cut: dict[tuple[int, int], _Replacement] = {}
    if server is not None:
        for (r, c), size in server.sizes.items():
            head = server.texts.get((r, c))
            marker = _marker(head, batch.column(c).type, size, max_cell_bytes)
            cut[(r, c)] = _Replacement(marker)
        for (r, c), text in server.texts.items():
            if (r, c) not in server.sizes:
                cut[(r, c)] = _Replacement(text, counted=False)
    for c, column in enumerate(batch.columns):
        measured = _sizes(column)
        for (r, cell), replacement in cut.items():
            if cell == c:
                measured[r] = len(replacement.text.encode())
        if max(measured, default=0) <= max_cell_bytes:
            columns.append(column)
            sizes.append(measured)
            continue
        over = [size > max_cell_bytes and (r, c) not in cut for r, size in enumerate(measured)]
        for r, is_over in enumerate(over):
            if is_over:
                head = _head(column.slice(r, 1), max_cell_bytes)
                marker = _marker(head, column.type, measured[r], max_cell_bytes)
                cut[(r, c)] = _Replacement(marker)
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


def _head(cell: pa.Array, limit: int) -> str | None:
    """The start of a text cell, at most `limit` code points; None for any other type."""
    kind = cell.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.utf8_slice_codeunits(cell, 0, limit).to_pylist()[0] or ""
    return None


def _marker(head: str | None, kind: pa.DataType, size: int, limit: int) -> str:
    note = f"[cut: {size:,} bytes, over limits.query_cell_max_bytes of {limit:,}]"
    if head is not None:
        # Code points, then bytes: a prefix that fits, whatever the characters.
        head = head.encode()[: max(0, limit - len(note) - 4)].decode(errors="ignore")
        return f"{head}… {note}"
    return f"{note} ({kind})"

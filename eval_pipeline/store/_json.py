"""JSON columns read back as values: the store writes them as text, and knows which they are."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from eval_pipeline.store._tables import TABLES


def decode_json(
    table: str, row: dict[str, Any], *, renamed: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`row` with each JSON column of `table` (`TableSpec.json_columns`) decoded, in place.

    Args:
        table: the table the columns come from.
        row: a row as read (a store file, a query); columns it lacks are left alone.
        renamed: a column's name in `row` when a query gave it another (`r.tool_calls AS
            run_tool_calls` is `{"tool_calls": "run_tool_calls"}`).

    Text that is not JSON stays text: a page can still show what was stored.
    """
    renamed = renamed or {}
    for column in TABLES[table].json_columns:
        key = renamed.get(column, column)
        value = row.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                row[key] = json.loads(value)
    return row


def decode_json_rows(
    table: str, rows: Iterable[dict[str, Any]], *, renamed: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every row of `rows` with `decode_json`."""
    return [decode_json(table, row, renamed=renamed) for row in rows]

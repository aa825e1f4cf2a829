"""What a query returned: its rows as JSON-safe values, and the compact text a model reads."""

from __future__ import annotations

import base64
import csv
import dataclasses
import datetime as dt
import io
import itertools
import json
import math
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from eval_pipeline.sandbox._ordering import order_columns, sql_is_ordered
from eval_pipeline.suite import truncate

#: Larger results keep the database's order: sorting them would cost more than it is worth
#: (a model reads the first 100 rows of any result anyway).
_MAX_ROWS_TO_ORDER = 10_000


@dataclass(frozen=True)
class QueryResult:
    """What one query returned, with JSON-safe values (see `to_json_safe`)."""

    sql: str
    columns: list[str]
    column_types: list[str]
    rows: list[tuple[Any, ...]]
    #: Total rows when the whole result was fetched; when `truncated`, the rows kept
    #: (counting the rest would mean producing the whole result).
    row_count: int
    truncated: bool
    duration_ms: float
    #: What the sandbox's byte or cell caps cut (see `SandboxLimits`); None when nothing.
    note: str | None = None

    def in_stable_order(self, dialect: str = "duckdb") -> QueryResult:
        """The same result with its rows in one order from run to run, where the query leaves
        the order open: all of it without ORDER BY on the outermost query (a database returns
        GROUP BY groups in any order, a parallel scan too), and within each run of rows that
        tie on every sort key when the keys are output columns (`ORDER BY n DESC` with two
        equal counts). What a model reads of it is then the same every time: a replay finds
        its recorded request, and cached completions match. A truncated or very large result
        is left as it came (only some of its rows are here), as are ties on sort keys that
        are not in the result.
        """
        if self.truncated or len(self.rows) > _MAX_ROWS_TO_ORDER:
            return self
        if not sql_is_ordered(self.sql, dialect):
            return dataclasses.replace(self, rows=sorted(self.rows, key=_row_text))
        keys = order_columns(self.sql, tuple(self.columns), dialect)
        if not keys:
            return self
        ties = itertools.groupby(self.rows, key=lambda row: [row[i] for i in keys])
        rows = [row for _, tie in ties for row in sorted(tie, key=_row_text)]
        return dataclasses.replace(self, rows=rows)

    def to_text(
        self, *, max_rows: int = 100, max_cell_chars: int = 200, max_chars: int = 20_000
    ) -> str:
        """The result as compact CSV for a model, with a closing line saying how many rows exist.

        NULL is written `NULL` (an empty cell would read as an empty string). Rows stop
        before the text passes `max_chars`, however wide they are.
        """
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        shown = 0
        for row in self.rows[:max_rows]:
            before = out.tell()
            writer.writerow(_cell_text(value, max_cell_chars) for value in row)
            if out.tell() > max_chars and shown:
                out.seek(before)
                out.truncate()
                break
            shown += 1
        if self.truncated:
            note = (
                f"(showing {shown:,} of more than {self.row_count:,} rows; aggregate, filter "
                "or add LIMIT to get the rows that matter)"
            )
        elif shown < self.row_count:
            note = f"(showing {shown:,} of {self.row_count:,} rows)"
        else:
            note = f"({self.row_count:,} row{'' if self.row_count == 1 else 's'})"
        if self.note:
            note += f"\n(cut: {self.note})"
        return out.getvalue() + note


def _row_text(row: tuple[Any, ...]) -> str:
    """A total order on rows of any values (NULLs and mixed types included)."""
    return json.dumps(row, default=str, sort_keys=True)


def to_json_safe(value: Any) -> Any:
    """A DuckDB value as plain JSON data.

    DECIMAL → float: grading compares numbers with tolerances, and 15 significant digits
    cover any money amount a test checks; the exact type stays in `column_types`.
    Dates, times and timestamps → ISO 8601 strings; INTERVAL → str of the timedelta;
    BLOB → "base64:..."; UUID → str; NaN → None; ±inf → "Infinity" / "-Infinity";
    LIST/ARRAY → list; STRUCT/MAP → dict with string keys. Integers stay exact.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        # HUGEINT (what SUM of integers gives) arrives as DECIMAL(38,0) through Arrow.
        if value.is_finite() and value.as_tuple().exponent == 0:
            return int(value)
        return to_json_safe(float(value))
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [to_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {_key_text(key): to_json_safe(item) for key, item in value.items()}
    return str(value)


def _key_text(key: Any) -> str:
    safe = to_json_safe(key)
    return safe if isinstance(safe, str) else str(safe)


def _cell_text(value: Any, max_chars: int) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list | dict):
        text = _compact_json(value)
    else:
        text = str(value)
    return truncate(text, max_chars)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

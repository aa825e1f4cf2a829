"""What PostgreSQL sends of each cell: wide cells cut on the server, values the client cannot convert sent as the server's text.

libpq reads a row whole before anything can look at it (a 900 MB cell is 900 MB here, then
again in Arrow), so `limits.query_max_bytes` can only hold if the server itself never sends
more. The agent's read runs inside a statement that measures each cell on the server and
sends, for a cell over `CellBounds.cell_bytes`, only its size and the start of its text; for
a row whose cells add up to more than `CellBounds.row_bytes`, only the sizes. A value that
ADBC's reader would turn into a wrong value or an error (money as cents, an infinite date, a
NaN NUMERIC, a 2-D array flattened, an XML array, a composite) is sent as the text the server
prints for it instead. Both go in two trailing columns (`SERVER_TEXT`, `SERVER_SIZE`) that the
sandbox reads back into the cells (`sandbox/_result_fetch.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pglast
import pyarrow as pa

from eval_pipeline.warehouses._connection import SERVER_SIZE, SERVER_TEXT, CellBounds

__all__ = ["bounded_statement"]

_PG_TYPE = b"POSTGRESQL:type"
_PG_TYPMOD = b"POSTGRESQL:typmod"

#: Types whose every value ADBC reads faithfully and whose width is fixed: sent as they are.
_AS_IS = frozenset({"bool", "int2", "int4", "int8", "float4", "float8", "time", "uuid"})
#: Types read faithfully within Python's range of dates (years 1 to 9999; not ±infinity).
_DATED = {
    "date": "'0001-01-01'::date AND '9999-12-31'::date",
    "timestamp": "'0001-01-01'::timestamp AND '9999-12-31 23:59:59.999999'::timestamp",
    "timestamptz": "'0001-01-01+00'::timestamptz AND '9999-12-31 23:59:59.999999+00'::timestamptz",
}
#: Text and bytes: measured by their length (no conversion), cut on the server.
_TEXTS = frozenset({"text", "varchar", "bpchar", "name"})
#: Types ADBC reads faithfully whose text the server measures; JSON stays JSON text.
_MEASURED_AS_TEXT = frozenset({"json", "jsonb"})
#: Arrays ADBC reads faithfully when they have one dimension starting at 1.
_ARRAYS = frozenset(f"_{name}" for name in {"bool", "int2", "int4", "int8", "float4", "float8"})
_ARRAYS_OF_TEXT = frozenset(f"_{name}" for name in _TEXTS)
#: The NUMERICs a float64 holds (past them a NUMERIC would read as ±inf); NaN and ±Infinity fail it.
_NUMERIC_RANGE = "-1e300 AND 1e300"


@dataclass(frozen=True)
class _Column:
    """How one result column is sent: the value, and what the server checks of it."""

    value: str  # SQL over `q.c{i}` giving the value sent when it fits
    cast: str | None = None  # the column's type, so a cut cell is a NULL of that type
    measure: str | None = None  # SQL over `m.c{i}` (the value) giving its size in bytes
    head: bool = False  # the start of its text goes with a cut cell
    unfaithful: str | None = None  # SQL over `m.c{i}`, true when it must go as text


def bounded_statement(sql: str, described: pa.Schema, bounds: CellBounds) -> str | None:
    """The statement to run for `sql` (one read, as the sandbox's check accepted it), or
    None when every column is of a type sent as it is.

    `described` is the server's description of `sql`'s result (ADBC's execute_schema, whose
    field metadata name the base type of each column: a domain reads as its base type).
    """
    columns = [_plan(i, field) for i, field in enumerate(described)]
    if not any(c.measure or c.unfaithful or c.value != f"q.c{i}" for i, c in enumerate(columns)):
        return None
    # pglast reads the statement as the server does; its text without a trailing `;`.
    body = pglast.split(sql, with_parser=True)[0]
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    values = [f"{c.value} AS c{i}" for i, c in enumerate(columns)]
    checks = [f"{c.measure} AS n{i}" for i, c in enumerate(columns) if c.measure]
    checks += [f"{c.unfaithful} AS u{i}" for i, c in enumerate(columns) if c.unfaithful]
    sizes = [f"least(r.n{i}, {bounds.cell_bytes})" for i, c in enumerate(columns) if c.measure]
    outer, texts, cut_sizes = [], [], []
    for i, (column, field) in enumerate(zip(columns, described, strict=True)):
        name = _identifier(field.name)
        if not (column.measure or column.unfaithful):
            outer.append(f"s.c{i} AS {name}")
            texts.append("NULL")
            cut_sizes.append("NULL")
            continue
        null = f"NULL::{column.cast}" if column.cast else "NULL"
        cut = f"(s.n{i} > {bounds.cell_bytes} OR s.t > {bounds.row_bytes})"
        withheld = " OR ".join(
            ([cut] if column.measure else []) + ([f"s.u{i}"] if column.unfaithful else [])
        )
        outer.append(f"CASE WHEN {withheld} THEN {null} ELSE s.c{i} END AS {name}")
        text = []
        if column.measure:
            head = "NULL"
            if column.head:  # none when the row is over: the sandbox drops it
                head = (
                    f"CASE WHEN s.t <= {bounds.row_bytes} "
                    f"THEN left(s.c{i}::text, {bounds.cell_bytes}) END"
                )
            text.append(f"WHEN {cut} THEN {head}")
            cut_sizes.append(f"CASE WHEN {cut} THEN s.n{i} END")
        else:
            cut_sizes.append("NULL")
        if column.unfaithful:
            text.append(f"WHEN s.u{i} THEN s.c{i}::text")
        texts.append(f"CASE {' '.join(text)} END")
    # OFFSET 0 keeps each level from being merged into the next, so a cell is computed and
    # measured once, not once per reference.
    return (
        f"SELECT {', '.join(outer)}, ARRAY[{', '.join(texts)}]::text[] AS {SERVER_TEXT}, "
        f"ARRAY[{', '.join(cut_sizes)}]::int8[] AS {SERVER_SIZE} "
        f"FROM (SELECT r.*, {' + '.join(sizes) or '0'} AS t "
        f"FROM (SELECT {', '.join(['m.*', *checks])} "
        f"FROM (SELECT {', '.join(values)} "
        f"FROM (SELECT * FROM (\n{body}\n) AS q0 OFFSET 0) AS q({names}) OFFSET 0) AS m "
        "OFFSET 0) AS r OFFSET 0) AS s"
    )


def _plan(i: int, field: pa.Field) -> _Column:
    """How column `i` (described by `field`) is sent."""
    metadata = field.metadata or {}
    kind = metadata.get(_PG_TYPE, b"").decode()
    column = f"q.c{i}"
    if kind in _AS_IS:
        return _Column(column)
    if kind == "oid":  # unsigned: ADBC's int32 would turn 3,000,000,000 negative
        return _Column(f"{column}::int8")
    # The base type, so a cut cell is a NULL the column's domain (NOT NULL, CHECK) never sees.
    if kind in _DATED:
        return _Column(
            f"{column}::{kind}", cast=kind, unfaithful=f"NOT (m.c{i} BETWEEN {_DATED[kind]})"
        )
    if kind == "numeric":
        modifier = int(metadata.get(_PG_TYPMOD) or -1)
        numeric = "numeric"
        if modifier >= 4:  # keeps NUMERIC(p, s), which the client reads as DECIMAL(p, s)
            numeric = f"numeric({(modifier - 4) >> 16}, {(modifier - 4) & 0xFFFF})"
        return _Column(
            f"{column}::{numeric}",
            cast=numeric,
            measure=f"octet_length(m.c{i}::text)",
            unfaithful=f"NOT (m.c{i} BETWEEN {_NUMERIC_RANGE})",
        )
    if kind in _TEXTS:
        return _Column(f"{column}::{kind}", measure=f"octet_length(m.c{i})", head=True)
    if kind == "bytea":
        return _Column(f"{column}::bytea", measure=f"octet_length(m.c{i})")
    if kind in _MEASURED_AS_TEXT:
        return _Column(f"{column}::{kind}", cast=kind, measure=f"octet_length(m.c{i}::text)")
    if kind in _ARRAYS or kind in _ARRAYS_OF_TEXT:
        return _Column(
            f"{column}::{kind[1:]}[]",
            cast=f"{kind[1:]}[]",
            measure=f"octet_length(m.c{i}::text)",
            # ADBC flattens [[1,2],[3,4]] and drops the bounds of '[0:1]={1,2}'.
            unfaithful=f"(array_ndims(m.c{i}) > 1 OR array_lower(m.c{i}, 1) <> 1)",
        )
    # Every other type (money, xml, ranges, composites, geometry, inet, ...): as the server
    # prints it.
    return _Column(f"{column}::text", measure=f"octet_length(m.c{i})", head=True)


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

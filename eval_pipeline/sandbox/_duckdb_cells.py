"""What DuckDB hands the sandbox of each cell: wide cells cut inside the engine, before Arrow copies them out.

A result's Arrow batches hold every cell whole (three cells of 300 MB were 900 MB of Arrow
on top of DuckDB's own copy), so the agent's read is wrapped in a projection that measures
each variable-width cell in DuckDB and hands over, for one over `CellBounds.cell_bytes`, only
its size and the start of its text; for a row over `CellBounds.row_bytes`, only the sizes.
Both travel in the trailing SERVER_TEXT and SERVER_SIZE columns, as from PostgreSQL
(`warehouses/_postgres_cells.py`), and `_result_fetch` reads them back into the cells.
"""

from __future__ import annotations

import duckdb

from eval_pipeline.warehouses import SERVER_SIZE, SERVER_TEXT, CellBounds

__all__ = ["bounded_relation"]

_VIEW = "eval_result"


def bounded_relation(
    relation: duckdb.DuckDBPyRelation, bounds: CellBounds
) -> duckdb.DuckDBPyRelation | None:
    """`relation` with its wide cells cut, or None when every column has a fixed width."""
    measures = [_measure(str(kind), f"q.c{i}") for i, kind in enumerate(relation.types)]
    if not any(measures):
        return None
    names = ", ".join(f"c{i}" for i in range(len(measures)))
    sized = [(i, m) for i, m in enumerate(measures) if m]
    checks = ", ".join(f"{m} AS n{i}" for i, m in sized)
    total = " + ".join(f"least(m.n{i}, {bounds.cell_bytes})" for i, _ in sized)
    outer, texts, sizes = [], [], []
    for i, (measure, kind) in enumerate(zip(measures, relation.types, strict=True)):
        if not measure:
            outer.append(f"s.c{i}")
            texts.append("NULL")
            sizes.append("NULL")
            continue
        cut = f"(s.n{i} > {bounds.cell_bytes} OR s.t > {bounds.row_bytes})"
        outer.append(f"CASE WHEN {cut} THEN NULL ELSE s.c{i} END")
        sizes.append(f"CASE WHEN {cut} THEN s.n{i} END")
        head = "NULL"
        if str(kind) == "VARCHAR":  # none when the row is over: the sandbox drops it
            head = (
                f"CASE WHEN s.n{i} > {bounds.cell_bytes} AND s.t <= {bounds.row_bytes} "
                f"THEN left(s.c{i}, {bounds.cell_bytes}) END"
            )
        texts.append(head)
    sql = (
        f"SELECT {', '.join(outer)}, [{', '.join(texts)}]::VARCHAR[] AS {SERVER_TEXT}, "
        f"[{', '.join(sizes)}]::BIGINT[] AS {SERVER_SIZE} "
        f"FROM (SELECT m.*, {total} AS t FROM (SELECT q.*, {checks} "
        f"FROM {_VIEW} AS q({names})) AS m) AS s"
    )
    return relation.query(_VIEW, sql)


def _measure(kind: str, column: str) -> str | None:
    """SQL giving the size in bytes of a cell of type `kind`, or None for a fixed width."""
    if kind == "VARCHAR":
        return f"strlen({column})"
    if kind == "BLOB":
        return f"octet_length({column})"
    if kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION", "JSON")):
        return f"strlen({column}::VARCHAR)"
    return None

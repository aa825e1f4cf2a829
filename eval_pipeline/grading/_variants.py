"""Perturbed variants of a DuckDB warehouse for the semantic check (Zhong, Yu and Klein, 2020).

Each variant is a DuckDB file with the warehouse's schemas, tables and views, where every
table is a seeded sample of its rows that keeps key relationships, with some rows duplicated,
numbers and dates shifted and NULLs injected. Two queries that agree on the warehouse but by
coincidence (a hard-coded literal, `max(id)` standing for `count(*)`) disagree on a variant;
two equivalent queries agree on every variant.

One file per variant rather than one file with a schema per variant: a variant must keep the
warehouse's schema names, because its views (`staging.stg_orders` reads `raw.raw_orders`) and
the queries under test name them; schemas per variant would mean rewriting both.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pyarrow as pa

from eval_pipeline.grading._warehouse_keys import Column, Table, WarehouseSchema, read_schema
from eval_pipeline.sandbox import SandboxLimits, SqlSandbox

__all__ = ["MANIFEST", "VariantOptions", "WarehouseVariants", "build_variants", "load_variants"]

MANIFEST = "variants.json"
"""Written last in the variants folder: its presence means every variant file is complete."""

_BASE, _TARGET = "__base", "__variant"


@dataclass(frozen=True)
class VariantOptions:
    """How much each variant departs from the warehouse.

    Args:
        max_rows_per_table: a table keeps at most this many rows (before duplicates), so the
            cost of building and querying variants stays bounded on a large warehouse.
        keep_fraction: each table keeps a share of its rows drawn uniformly from this range
            per variant and table, after dropping rows whose referenced rows were dropped.
        duplicate_fraction: this share of a table's kept rows is added again (at least one
            row). Key columns get fresh values, so keys stay unique and `COUNT(DISTINCT id)`
            still equals `COUNT(*)` when it did; every other value is repeated.
        shift_fraction: this share of rows is shifted: every number column of the row that
            is no key is scaled by one factor in [0.5, 1.5] (so `total = price + tax` within
            a row still holds), every integer column gains 1 to 3, and every date and
            timestamp column moves back by one number of days in [1, 45] (never forward, so
            no row lands after the data's last day).
        null_fraction: this share of rows gets NULL in each nullable column that is no key.
        null_columns: `"observed"` injects NULLs only into declared-nullable columns that
            already hold a NULL on the warehouse; `"declared"` into every declared-nullable
            column. Warehouses built by dbt declare nothing NOT NULL, so "declared" would also
            put NULLs into columns the data never leaves empty and fail rewrites that rely on
            it (`COUNT(status)` for `COUNT(*)`).
    """

    max_rows_per_table: int = 10_000
    keep_fraction: tuple[float, float] = (0.5, 0.9)
    duplicate_fraction: float = 0.05
    shift_fraction: float = 0.3
    null_fraction: float = 0.1
    null_columns: Literal["observed", "declared"] = "observed"

    def __post_init__(self) -> None:
        low, high = self.keep_fraction
        if not 0 < low <= high <= 1:
            raise ValueError(f"keep_fraction must satisfy 0 < low <= high <= 1, got {low, high}")
        if self.max_rows_per_table < 1:
            raise ValueError("max_rows_per_table must be at least 1")
        for name in ("duplicate_fraction", "shift_fraction", "null_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")


@dataclass(frozen=True)
class WarehouseVariants:
    """Variant files built by `build_variants`, numbered from 1 in `paths` order."""

    folder: Path
    paths: tuple[Path, ...]
    seed: int
    #: Rows per table (`schema.table`) of each variant, in `paths` order.
    row_counts: tuple[dict[str, int], ...] = field(default=(), repr=False)

    def open(self, limits: SandboxLimits | None = None) -> list[SqlSandbox]:
        """A read-only SQL sandbox per variant (close them with `close()` when done)."""
        sandboxes: list[SqlSandbox] = []
        try:
            for path in self.paths:
                sandboxes.append(SqlSandbox.for_file(path, limits=limits))
        except BaseException:
            for sandbox in sandboxes:
                sandbox.close()
            raise
        return sandboxes


def build_variants(
    warehouse: str | Path,
    folder: str | Path,
    *,
    count: int = 8,
    seed: int = 0,
    options: VariantOptions | None = None,
) -> WarehouseVariants:
    """Build `count` perturbed variants of a DuckDB warehouse file into `folder`.

    The same warehouse, count, seed and options give the same variants, row for row. Tables
    are built parents first: a row is kept only when every row it references (see
    `read_schema` for how references are found) was kept, so joins on keys never lose a row
    to a missing partner that the warehouse had. One-row tables (a reporting date, settings)
    are copied unchanged, since a second row or none would break the scalar subqueries that
    read them. Views are re-created from their definitions; a view that no longer builds is
    left out and named in the manifest.

    Variants and a manifest already in the folder are replaced; other files are left alone.
    The old manifest goes first and the new one is written last, and each file is written
    under a temporary name, so an interrupted build never leaves variants that look whole.

    Args:
        warehouse: the DuckDB database file (opened read-only).
        folder: where `variant_1.duckdb` ... and `variants.json` go.
        count: how many variants (Zhong et al. distil a suite of this order).
        seed: the seed of every random choice.
        options: how far variants depart from the warehouse; see `VariantOptions`.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    options = options or VariantOptions()
    warehouse, folder = Path(warehouse), Path(folder)
    if not warehouse.is_file():
        raise FileNotFoundError(f"warehouse database not found: {warehouse}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)
    for old in folder.glob("variant_*.duckdb*"):
        old.unlink()
    connection = duckdb.connect(":memory:")
    try:
        connection.execute(f"ATTACH {_literal(str(warehouse))} AS {_BASE} (READ_ONLY)")
        schema = read_schema(connection, _BASE)
        paths, counts, skipped_views = [], [], {}
        for number in range(1, count + 1):
            path = folder / f"variant_{number}.duckdb"
            partial = path.with_suffix(".duckdb.partial")
            connection.execute(f"ATTACH {_literal(str(partial))} AS {_TARGET}")
            try:
                rows = _build_one(connection, schema, options, seed, number)
                skipped = _create_views(connection, schema)
            finally:
                connection.execute("USE memory")
                connection.execute(f"DETACH {_TARGET}")
            os.replace(partial, path)
            paths.append(path)
            counts.append(rows)
            if skipped:
                skipped_views[number] = skipped
    finally:
        connection.close()
    manifest = {
        "warehouse": str(warehouse),
        "count": count,
        "seed": seed,
        "options": asdict(options),
        "foreign_keys": [asdict(fk) for fk in schema.foreign_keys],
        "row_counts": counts,
        "skipped_views": skipped_views,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return WarehouseVariants(folder, tuple(paths), seed, tuple(counts))


def load_variants(folder: str | Path) -> WarehouseVariants | None:
    """The variants `build_variants` left in `folder`, or None when there is no whole build
    there (no manifest: never built, or interrupted)."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    paths = tuple(folder / f"variant_{n}.duckdb" for n in range(1, int(manifest["count"]) + 1))
    if not all(path.is_file() for path in paths):
        return None
    counts = tuple(manifest.get("row_counts") or ())
    return WarehouseVariants(folder, paths, int(manifest["seed"]), counts)


def _build_one(
    connection: duckdb.DuckDBPyConnection,
    schema: WarehouseSchema,
    options: VariantOptions,
    seed: int,
    number: int,
) -> dict[str, int]:
    rows: dict[str, int] = {}
    for schema_name in sorted({t.schema for t in schema.tables} | {s for s, _, _ in schema.views}):
        connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_TARGET}.{_quote(schema_name)}")
    built: set[tuple[str, str]] = set()
    for index, table in enumerate(schema.tables):
        # One generator per (seed, variant, table): a table's rows do not depend on how many
        # random numbers the tables before it drew.
        rng = np.random.default_rng([seed, number, index])
        rows[f"{table.schema}.{table.name}"] = _build_table(
            connection, schema, table, options, rng, built
        )
        built.add((table.schema, table.name))
    return rows


def _build_table(
    connection: duckdb.DuckDBPyConnection,
    schema: WarehouseSchema,
    table: Table,
    options: VariantOptions,
    rng: np.random.Generator,
    built: set[tuple[str, str]],
) -> int:
    source, target = f"{_BASE}.{table.qualified}", f"{_TARGET}.{table.qualified}"
    if table.row_count <= 1:
        connection.execute(f"CREATE TABLE {target} AS SELECT * FROM {source}")
        return table.row_count
    foreign = [fk for fk in schema.parents_of(table) if (fk.schema, fk.parent) in built]
    conditions = [
        f"(b.{_quote(fk.column)} IS NULL OR b.{_quote(fk.column)} IN "
        f"(SELECT {_quote(fk.parent_column)} FROM {_TARGET}.{_quote(fk.schema)}.{_quote(fk.parent)}))"
        for fk in foreign
    ]
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    candidates = connection.execute(
        f"SELECT b.rowid FROM {source} AS b {where} ORDER BY b.rowid"
    ).fetchnumpy()["rowid"]
    kept = candidates[rng.random(len(candidates)) < rng.uniform(*options.keep_fraction)]
    if len(kept) == 0 and len(candidates):
        kept = candidates[rng.integers(len(candidates), size=1)]
    if len(kept) > options.max_rows_per_table:
        kept = np.sort(rng.choice(kept, options.max_rows_per_table, replace=False))
    foreign_columns = {
        fk.column
        for fk in schema.foreign_keys
        if fk.table == table.name and fk.schema == table.schema
    }
    keys = set(table.keys)
    can_duplicate = all(
        c.kind == "integer" or c.data_type.upper() == "VARCHAR"
        for c in table.columns
        if c.name in keys
    )
    duplicates = (
        rng.choice(kept, max(1, round(len(kept) * options.duplicate_fraction)), replace=False)
        if can_duplicate and len(kept)
        else np.array([], dtype=kept.dtype)
    )
    rowids = np.concatenate([kept, duplicates])
    m = len(rowids)
    copy = np.concatenate([np.zeros(len(kept), np.int64), np.arange(1, len(duplicates) + 1)])
    shifted = rng.random(m) < options.shift_fraction
    plan = {
        "__ord": np.arange(m),
        "__rid": rowids,
        "__copy": copy,
        "__scale": np.where(shifted, rng.uniform(0.5, 1.5, m), 1.0),
        "__delta": np.where(shifted, rng.integers(1, 4, m), 0),
        # Only back in time: moved forward, rows would land after the data's last day (orders
        # in the future), and "this year" written as a date window or as YEAR(...) = 2026
        # would disagree on data no real warehouse holds.
        "__days": np.where(shifted, rng.integers(-45, 0, m), 0),
    }
    select = []
    for position, column in enumerate(table.columns):
        name = _quote(column.name)
        value = f"b.{name}"
        if column.name in keys:
            if len(duplicates):
                fresh = _fresh_key(connection, source, column)
                value = f"CASE WHEN p.__copy > 0 THEN {fresh} ELSE b.{name} END"
        elif column.name not in foreign_columns:
            value = _shifted(value, column)
            eligible = column.nullable and (options.null_columns == "declared" or column.has_nulls)
            if eligible:
                mask = f"__null_{position}"
                plan[mask] = rng.random(m) < options.null_fraction
                value = f"CASE WHEN p.{mask} THEN NULL ELSE {value} END"
        select.append(f"CAST({value} AS {column.data_type}) AS {name}")
    connection.register("__plan", pa.table(plan))
    try:
        connection.execute(
            f"CREATE TABLE {target} AS SELECT {', '.join(select)} FROM __plan AS p "
            f"JOIN {source} AS b ON b.rowid = p.__rid ORDER BY p.__ord"
        )
    finally:
        connection.unregister("__plan")
    return m


def _shifted(value: str, column: Column) -> str:
    kind = column.kind
    if kind == "number":
        # TRY_CAST: a value pushed past a DECIMAL's precision keeps its value.
        return f"COALESCE(TRY_CAST({value} * p.__scale AS {column.data_type}), {value})"
    if kind == "integer":
        return f"COALESCE(TRY_CAST({value} + p.__delta AS {column.data_type}), {value})"
    if kind in ("date", "timestamp"):
        return f"{value} + to_days(CAST(p.__days AS INTEGER))"
    return value


def _fresh_key(connection: duckdb.DuckDBPyConnection, source: str, column: Column) -> str:
    """SQL for a duplicated row's key: past the largest integer key, or the text with a suffix."""
    name = _quote(column.name)
    if column.kind == "integer":
        top = connection.execute(f"SELECT COALESCE(MAX({name}), 0) FROM {source}").fetchall()[0][0]
        return f"{int(top)} + p.__copy"
    return f"CAST(b.{name} AS VARCHAR) || '~' || CAST(p.__copy AS VARCHAR)"


def _create_views(connection: duckdb.DuckDBPyConnection, schema: WarehouseSchema) -> list[str]:
    connection.execute(f"USE {_TARGET}")
    skipped = []
    for view_schema, name, sql in schema.views:
        try:
            connection.execute(sql)
        except duckdb.Error as error:
            skipped.append(f"{view_schema}.{name}: {str(error).splitlines()[0]}")
    return skipped


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

"""Dagster's standard metadata for an asset kept as a store table: its columns, its name in results.duckdb, where a partition lives and how many rows it holds."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

from eval_pipeline.store import TABLES, StoreLayout


def table_definition(table: str) -> dict[str, Any]:
    """The static part, on the asset's definition: the column schema (from the store's own
    table schema: JSON documents are stored as text and say so) and the table's name in
    `results.duckdb`."""
    spec = TABLES[table]
    columns = [
        dg.TableColumn(
            field.name,
            "json" if field.name in spec.json_columns else str(field.type),
        )
        for field in spec.schema
    ]
    return {
        "dagster/column_schema": dg.TableSchema(columns=columns),
        "dagster/table_name": f"results.{table}",
    }


def table_written(
    layout: StoreLayout,
    table: str,
    rows: int,
    *,
    model: str | None = None,
    run_date: date | None = None,
) -> dict[str, Any]:
    """The part of a materialization: where the partition it wrote lives, and its rows."""
    return {
        "dagster/uri": dg.MetadataValue.url(
            layout.partition_uri(table, model=model, run_date=run_date)
        ),
        "dagster/row_count": rows,
    }

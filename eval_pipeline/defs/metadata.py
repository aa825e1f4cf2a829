"""Metadata of the assets: the static part of a store table (its columns, its name in results.duckdb), and what a stage says of its materialization (`eval_pipeline.pipeline.Materialized`) as Dagster takes it."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

from eval_pipeline.pipeline.stages import CheckOutcome, Materialized, Metadata, Value
from eval_pipeline.store import TABLES


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


def _value(value: Any) -> Any:
    if not isinstance(value, Value):
        return value
    kinds = {
        "float": dg.MetadataValue.float,
        "json": dg.MetadataValue.json,
        "md": dg.MetadataValue.md,
        "path": dg.MetadataValue.path,
        "url": dg.MetadataValue.url,
    }
    return kinds[value.kind](value.value)


def as_metadata(metadata: Metadata) -> dict[str, Any]:
    """A stage's metadata as Dagster's values."""
    return {key: _value(value) for key, value in metadata.items()}


def check_result(check: CheckOutcome) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=check.name,
        passed=check.passed,
        severity=dg.AssetCheckSeverity.WARN if check.warn else dg.AssetCheckSeverity.ERROR,
        description=check.description,
        metadata=as_metadata(check.metadata),
    )


def recorded(
    context: dg.AssetExecutionContext,
    materialized: Materialized,
    *,
    asset_key: dg.AssetKey | None = None,
    with_checks: bool = True,
    first: Metadata | None = None,
) -> dg.MaterializeResult:
    """A stage's materialization as its asset returns it, its lines logged by the step.
    `with_checks=False`: the checks are yielded on their own (`check_result`), as a
    multi-asset whose checks are optional outputs yields them. `first`: metadata the asset
    adds, shown before the stage's."""
    for level, line in materialized.log:
        getattr(context.log, level)(line)
    version = materialized.data_version
    return dg.MaterializeResult(
        asset_key=asset_key,
        data_version=dg.DataVersion(version) if version is not None else None,
        metadata=as_metadata({**(first or {}), **materialized.metadata}),
        check_results=[check_result(c) for c in materialized.checks] if with_checks else None,
    )


def model_and_day(context: dg.AssetExecutionContext) -> tuple[str, date]:
    """The model and the day of a (model, day) partition's materialization."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        # A run launched with the `dagster/partition` tag alone (GraphQL, a script) gets the
        # key as its string, "date|model": Dagster parses it only with the dimension tags.
        grid = context.assets_def.partitions_def
        assert isinstance(grid, dg.MultiPartitionsDefinition)
        key = grid.get_partition_key_from_str(key)
    keys = key.keys_by_dimension
    return keys["model"], date.fromisoformat(keys["date"])

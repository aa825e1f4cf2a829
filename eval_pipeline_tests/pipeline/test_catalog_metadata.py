"""The Dagster catalog says where the data is: each store-backed asset's columns, its table in results.duckdb, a partition's location and rows."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import dagster as dg
import pytest

from eval_pipeline.store import TABLES
from eval_pipeline_tests.pipeline.small_suite import DAY, MODELS, evaluate, prepare

pytestmark = pytest.mark.slow  # Dagster runs


def test_store_backed_assets_carry_their_schema_location_and_row_count(small_suite, instance):
    defs = prepare(small_suite, instance)
    evaluate(defs, instance, MODELS[0])

    graph = defs.resolve_asset_graph()
    for table in ("test_cases", "reference_results", "agent_runs", "grades", "model_summaries"):
        metadata = graph.get(dg.AssetKey(table)).metadata
        schema = metadata["dagster/column_schema"]
        assert [c.name for c in schema.columns] == TABLES[table].schema.names
        assert metadata["dagster/table_name"] == f"results.{table}"

    event = instance.get_latest_materialization_event(dg.AssetKey("grades"))
    written = event.asset_materialization.metadata
    grades = written["passed"].value + written["failed"].value + written["errors"].value
    assert written["dagster/row_count"].value == grades == 4
    folder = Path(unquote(urlparse(written["dagster/uri"].value).path))
    assert folder.is_dir() and any(folder.glob("*.parquet")), folder
    assert f"date={DAY}" in folder.as_posix()

"""Dagster's half of skipping what did not change: whether a stage's partitions are fresh, as the UI says.

`pipeline/_unchanged.py` owns skipping what did not change (its docstring states the three
levels, what each compares and where each lives); this module answers the one question only
Dagster can, the stale status of asset partitions (`Freshness`), for a model's partition
(`defs/evaluate.py::_unchanged`) and the day's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import dagster as dg

# Not in Dagster's public API: the resolver the UI itself uses for "Unsynced" (no public call
# answers it); defs/test_private_dagster_api.py pins the Dagster minor it was checked on.
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus

from eval_pipeline.defs.names import UNNAMED, SuiteNames


class Freshness:
    """The stale status of asset partitions in one instance, as the Dagster UI shows it.

    One resolver per evaluation: it caches what it read, and an evaluation asks before each
    stage only about partitions that stage would materialize. Assets are asked for by their
    bare names (`agent_runs`), keyed as the definitions' `names` say.
    """

    def __init__(
        self, defs: dg.Definitions, instance: dg.DagsterInstance, names: SuiteNames = UNNAMED
    ) -> None:
        self._instance = instance
        self._names = names
        graph = defs.resolve_asset_graph()
        view = AssetGraphView(
            temporal_context=TemporalContext(effective_dt=datetime.now(UTC), last_event_id=None),
            instance=instance,
            asset_graph=graph,
        )
        self._resolver = CachingStaleStatusResolver(instance, graph, view)
        # One query for every asset's latest record, not one per input (the warehouse's dbt
        # models are inputs of the runs and the references: dozens).
        self._resolver.instance_queryer.prefetch_asset_records(graph.get_all_asset_keys())

    def fresh(self, assets: Sequence[str], partition_key: str | None) -> bool:
        """Every asset's partition is materialized and none of its inputs' data versions
        changed since (the UI shows no "Unsynced" and no "Missing")."""
        return all(
            self._resolver.get_status(self._names.key(name), partition_key) is StaleStatus.FRESH
            for name in assets
        )

    def latest_metadata(self, asset: str, partition_key: str) -> dict[str, object] | None:
        """The metadata values of the asset partition's latest materialization, if any."""
        records = self._instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=self._names.key(asset), asset_partitions=[partition_key]
            ),
            limit=1,
        ).records
        if not records or records[0].asset_materialization is None:
            return None
        metadata = records[0].asset_materialization.metadata
        return {name: value.value for name, value in metadata.items()}

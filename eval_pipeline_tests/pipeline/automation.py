"""Dagster as its UI and daemon see a suite: stale statuses, sensor ticks, automation ticks.

The sensors and the automation conditions are evaluated as the daemon evaluates them
(`evaluate_tick`, `dg.evaluate_automation_conditions`), and what they request is executed in
this process against the same instance, as the daemon's runs would be.
"""

from __future__ import annotations

import warnings

import dagster as dg
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline_tests.pipeline.small_suite import DAY, materialize


def status(
    defs: dg.Definitions, instance: dg.DagsterInstance, asset: str, model: str
) -> tuple[StaleStatus, list[tuple[str, str]]]:
    """The asset partition's status as the Dagster UI computes it, with its root causes."""
    resolver = get_stale_status_resolver(instance, list(defs.resolve_asset_graph().assets_defs))
    key, partition = dg.AssetKey(asset), model_day_key(model, DAY)
    causes = [
        (cause.key.asset_key.to_user_string(), cause.reason)
        for cause in resolver.get_stale_root_causes(key, partition)
    ]
    return resolver.get_status(key, partition), causes


def fresh(
    defs: dg.Definitions, instance: dg.DagsterInstance, asset: str, partition: str | None
) -> bool:
    """The asset partition is materialized and none of its inputs changed since: the UI
    shows neither "Unsynced" nor "Missing"."""
    resolver = get_stale_status_resolver(instance, list(defs.resolve_asset_graph().assets_defs))
    return resolver.get_status(dg.AssetKey(asset), partition) is StaleStatus.FRESH


def watch_tick(defs: dg.Definitions, instance: dg.DagsterInstance):
    """A tick of `watch_suite_files` as the daemon runs it: its observations recorded
    (before any run it requests), its result returned."""
    sensor = defs.resolve_sensor_def("watch_suite_files")
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        result = sensor.evaluate_tick(context)
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result


def run_requested(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest):
    """Execute a sensor's run request, as the daemon would launch it."""
    result = materialize(
        defs,
        [key.to_user_string() for key in request.asset_selection or []],
        instance=instance,
        tags=dict(request.tags),
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]


def run_partition(
    defs: dg.Definitions, instance: dg.DagsterInstance, asset: str | list[str], partition
):
    """Materialize what automation requested of one partition (of one asset, or of several
    sharing its partitions), as the daemon's run would."""
    assets = [asset] if isinstance(asset, str) else asset
    if partition is not None and "|" in partition:
        grid = defs.resolve_asset_graph().get(dg.AssetKey(assets[0])).partitions_def
        partition = grid.get_partition_key_from_str(partition)
    result = materialize(defs, assets, instance=instance, partition_key=partition)
    assert result.success, [e.message for e in result.all_events if e.is_failure]


def runs_of(asked: set[tuple[str, str | None]]) -> dict[str | None, list[str]]:
    """A tick's requests as the automation sensor launches them: one run per partition, with
    every asset requested of it (unpartitioned assets together)."""
    runs: dict[str | None, list[str]] = {}
    for asset, partition in sorted(asked, key=str):
        runs.setdefault(partition, []).append(asset)
    return runs


def evaluate_conditions(defs, instance, cursor=None):
    """What the daemon's tick of the automation sensor decides."""
    with warnings.catch_warnings():
        # Dagster's own test helper selects sources with a beta parameter and warns about it.
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)


def tick(defs, instance, cursor):
    """One evaluation of the automation conditions, with the (asset, partition)s it requests."""
    result = evaluate_conditions(defs, instance, cursor)
    asked = {
        (key.to_user_string(), partition)
        for key in defs.resolve_asset_graph().get_all_asset_keys()
        for partition in result.get_requested_partitions(key)
    }
    return result, asked


def drive(defs, instance, cursor=None, *, max_ticks: int = 12):
    """Tick and run what each tick requests (one run per partition, `runs_of`) until a tick
    requests nothing; every tick's requests, in order."""
    ticks: list[set[tuple[str, str | None]]] = []
    for _ in range(max_ticks):
        result, asked = tick(defs, instance, cursor)
        cursor = result.cursor
        if not asked:
            return cursor, ticks
        ticks.append(asked)
        for partition, assets in runs_of(asked).items():
            run_partition(defs, instance, assets, partition)
    raise AssertionError(f"automation never settled: {ticks}")


def materialized(instance: dg.DagsterInstance, asset: str) -> set[str]:
    return set(instance.get_materialized_partitions(dg.AssetKey(asset)))

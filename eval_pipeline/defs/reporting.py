"""Work done outside a Dagster step reported to the instance as a step records it: each materialization with the versions a step gives it, then its checks' results.

Two callers do work outside a step: the recorder (`defs/record.py`), which reports what
`eval-pipeline test` did in its own process, and the runs step launched alone from an asset
page (`defs/assets/runs.py`), which reports the rest of its partition's chain. Both report
with the instance's runless reporting (`DagsterInstance.report_runless_asset_event`); a
materialization carries the tags a step would give it (`reported_tags`): its data version
(the stage's own, or Dagster's logical version of its code version and inputs), its code
version, and for each input it read that input's data version and event
(`dagster/input_data_version/…`, `dagster/input_event_pointer/…`), so lineage, staleness and
its causes read it exactly as they read a step's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import dagster as dg

# Not public: how a step of a run computes and spells its provenance (the same functions),
# the target a check result names, and the job name of a runless event (with
# `DagsterInstance.report_dagster_event`, see `report_stage`); pinned, each as we rely on it,
# with the Dagster minor they were checked on (defs/test_private_dagster_api.py).
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.definitions.data_version import (
    DEFAULT_DATA_VERSION,
    NULL_EVENT_POINTER,
    compute_logical_data_version,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)
from dagster._core.definitions.partitions.utils.multi import get_tags_from_multi_partition_key
from dagster._core.instance.utils import RUNLESS_JOB_NAME

from eval_pipeline.defs.metadata import check_result
from eval_pipeline.pipeline import stages

__all__ = ["EVALUATION_TAG", "Latest", "partition_of", "report_stage", "reported_tags"]

#: On every event reported: the id of the work it came from (a command's stage run: one per
#: job a run would have run, the day's inputs, a model's partition, the report; or the run
#: whose step reported it).
EVALUATION_TAG = "eval_pipeline/evaluation"

DATA_VERSION_TAG = "dagster/data_version"
CODE_VERSION_TAG = "dagster/code_version"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"


class Latest:
    """The instance's latest events of the assets a record reads, each read once and kept
    current as the record reports more: Dagster's SQLite storage opens a database for every
    read, and a record's stages read their parents' events again and again."""

    def __init__(self, instance: dg.DagsterInstance, graph) -> None:
        self.instance = instance
        self._graph = graph
        self._events: dict[tuple[dg.AssetKey, str | None], Any] = {}
        self._observed: dict[dg.AssetKey, Any] = {}
        self._entries: dict[dg.AssetKey, Any] | None = None

    def materialization(self, key: dg.AssetKey, partition: str | None = None):
        """The latest materialization record of the asset's `partition`, or of any
        partition (None); None before one."""
        if (key, partition) not in self._events:
            if partition is None:
                entry = self._asset_entries().get(key)
                found = entry and entry.last_materialization_record
            else:
                records = self.instance.fetch_materializations(
                    dg.AssetRecordsFilter(key, asset_partitions=[partition]), limit=1
                ).records
                found = records[0] if records else None
            self._events[key, partition] = found
        return self._events[key, partition]

    def observation(self, key: dg.AssetKey):
        """The latest observation record of an observable asset (None before one)."""
        if key not in self._observed:
            records = self.instance.fetch_observations(key, limit=1).records
            self._observed[key] = records[0] if records else None
        return self._observed[key]

    def reported(self, key: dg.AssetKey, partition: str | None):
        """The materialization just reported of the asset's `partition`, now its latest."""
        [written] = self.instance.fetch_materializations(
            dg.AssetRecordsFilter(key, asset_partitions=[partition] if partition else None),
            limit=1,
        ).records
        self._events[key, partition] = self._events[key, None] = written
        return written

    def _asset_entries(self) -> dict[dg.AssetKey, Any]:
        if self._entries is None:  # one read for every asset of the graph
            keys = sorted(self._graph.get_all_asset_keys(), key=lambda k: k.to_user_string())
            self._entries = {
                record.asset_entry.asset_key: record.asset_entry
                for record in self.instance.get_asset_records(keys)
            }
        return self._entries


def partition_of(graph, key: dg.AssetKey, model: str, day: str) -> str | None:
    """The partition of the asset that a stage of `model` on `day` materializes (by the
    asset's own partitions: none, the day, or the model and the day)."""
    partitions = graph.get(key).partitions_def
    if partitions is None:
        return None
    if isinstance(partitions, dg.MultiPartitionsDefinition):
        return dg.MultiPartitionKey({"date": day, "model": model})
    return day


def report_stage(
    latest: Latest,
    graph,
    key: dg.AssetKey,
    partition: str | None,
    done: stages.Materialized,
    *,
    tags: Mapping[str, str],
    metadata: Mapping[str, Any],
    work_id: str,
    checks_run_id: str,
) -> None:
    """Report one stage's materialization (with `tags` beside its provenance, `metadata` as
    Dagster metadata) and then its checks' results, as a run's step would record them.
    `work_id`: the id of the work that made it, its code version when the asset declares
    none; `checks_run_id`: the id the results of partitioned checks are stored under."""
    instance = latest.instance
    code_version = graph.get(key).code_version or work_id
    provenance = reported_tags(
        instance, graph, key, partition, done.data_version, code_version, latest=latest
    )
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key=key,
            partition=partition,
            metadata=dict(metadata),
            tags={**provenance, **tags},
        )
    )
    written = latest.reported(key, partition)
    if not done.checks:
        return
    target = AssetCheckEvaluationTargetMaterializationData(
        storage_id=written.storage_id, run_id=written.run_id, timestamp=written.timestamp
    )
    for check in done.checks:
        result = check_result(check)
        # A check of its own partitions records its result for the partition; one without
        # (reference_health) for the asset, as a step records them.
        spec = graph.get(dg.AssetCheckKey(key, check.name))
        evaluation = dg.AssetCheckEvaluation(
            asset_key=key,
            check_name=check.name,
            passed=result.passed,
            metadata=result.metadata,
            target_materialization_data=target,
            severity=result.severity,
            description=result.description,
            partition=partition if spec.partitions_def is not None else None,
            blocking=spec.blocking,
        )
        if evaluation.partition is None:
            instance.report_runless_asset_event(evaluation)
            continue
        # Dagster's storage keeps one runless result per check and partition (its unique
        # index counts the missing run as one run): a partition evaluated again could not
        # be recorded. The result is stored as the runless one is, under the id of the
        # evaluation that did the work (one database of SQLite's storage for all its
        # results), so every evaluation of a partition is in the check's history.
        instance.report_dagster_event(
            dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
                event_specific_data=evaluation,
                job_name=RUNLESS_JOB_NAME,
            ),
            run_id=checks_run_id,
        )


def reported_tags(
    instance: dg.DagsterInstance,
    graph,
    key: dg.AssetKey,
    partition: str | None,
    data_version: str | None,
    code_version: str,
    *,
    latest: Latest | None = None,
) -> dict[str, str]:
    """The tags a step of a run gives the asset's materialization of `partition`: its code
    version, each input's data version and event as the instance holds them now, and its
    data version (`data_version`, else Dagster's logical one from the code version and the
    inputs' versions), with the partition's dimensions of a multi-partitioned asset.
    `latest`: the instance's events as a record has read them so far."""
    latest = latest or Latest(instance, graph)
    inputs: dict[dg.AssetKey, dg.DataVersion] = {}
    tags = {CODE_VERSION_TAG: code_version}
    for parent in sorted(graph.get(key).parent_keys, key=lambda k: k.to_user_string()):
        # The version Dagster's staleness reads back (`CachingInstanceQueryer`): an observable
        # source's last observation (which SQLite's asset entry does not hold), else the
        # last materialization; an external asset that cannot be observed stays INITIAL.
        if graph.get(parent).is_observable:
            record = latest.observation(parent)
        else:
            record = latest.materialization(parent)
        if record is None:
            version, pointer = DEFAULT_DATA_VERSION, NULL_EVENT_POINTER
        else:
            event = record.asset_materialization or record.asset_observation
            version = dg.DataVersion(event.tags.get(DATA_VERSION_TAG) or DEFAULT_DATA_VERSION.value)
            pointer = str(record.storage_id)
            if partition is not None and graph.get(parent).is_partitioned:
                version = _partitions_version(latest, graph, key, parent, partition)
        inputs[parent] = version
        tags[get_input_data_version_tag(parent)] = version.value
        tags[get_input_event_pointer_tag(parent)] = pointer
    if data_version is None:
        tags[DATA_VERSION_TAG] = compute_logical_data_version(code_version, inputs).value
    else:
        tags[DATA_VERSION_TAG] = data_version
        tags[USER_PROVIDED_TAG] = "true"
    if isinstance(partition, dg.MultiPartitionKey):
        tags.update(get_tags_from_multi_partition_key(partition))
    return tags


def _partitions_version(
    latest: Latest, graph, key: dg.AssetKey, parent: dg.AssetKey, partition: str
) -> dg.DataVersion:
    """The data version of the parent's partitions the child's `partition` reads, as a step
    computes it: a digest of their data versions, in the order of their keys."""
    with dg.partition_loading_context(dynamic_partitions_store=latest.instance):
        mapped = graph.get_parent_partition_keys_for_child(partition, parent, key)
        keys = sorted(mapped.partitions_subset.get_partition_keys())
    versions = []
    for part in keys:
        record = latest.materialization(parent, part)
        if record and DATA_VERSION_TAG in record.asset_materialization.tags:
            versions.append(record.asset_materialization.tags[DATA_VERSION_TAG])
    return dg.DataVersion(hashlib.sha256("".join(versions).encode()).hexdigest())

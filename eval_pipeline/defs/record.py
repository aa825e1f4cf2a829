"""A command's evaluation recorded in the suite's Dagster instance as Dagster records work done outside a run: each materialization and check result reported, with the versions a run would give it.

`eval-pipeline test` runs the stages in its own process (`pipeline.run_stages`) and leaves
their record among the instance's pending ones (`pending_records`). `record_pending` reports
each with the instance's runless reporting (`DagsterInstance.report_runless_asset_event`):
the suite files' observations, then every materialization in the order the stages made
them, then its checks' evaluations. A materialization carries the tags a step of a run gives
it (`reported_tags`): its data version (the stage's own, or Dagster's logical version of its
code version and inputs), its code version, and for each input it read that input's data
version and event (`dagster/input_data_version/…`, `dagster/input_event_pointer/…`), so the
UI shows the same lineage, staleness and causes and check history as after a run, and no
run is executed again. Every event says it came from the command line (`LAUNCHED_BY_TAG`
= cli) and from which of its evaluations (`EVALUATION_TAG`); each materialization says when
the command did the work (`RECORDED_AT`).

Records are reported in the order the commands ran them, one process at a time; a record is
removed once it is in the instance (a run of it already there is not reported twice); one
that cannot be recorded (its suite folder gone, its definitions no longer loading) is kept
beside them as `<name>.failed`, its error in the log, and the others are recorded.

`Recorder` is the process that does it for a command: started as the stages start, it
imports Dagster and loads the suite's asset graph meanwhile, and records once told the
stages are done; `eval-pipeline ui` and `eval-pipeline warehouse` record what is pending
before they start.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

# Not public: how a step of a run computes and spells its provenance (the same functions),
# the target a check result names, and the job name of a runless event (with
# `DagsterInstance.report_dagster_event`, see `_report`); pinned, each as we rely on it, with
# the Dagster minor they were checked on (defs/test_private_dagster_api.py).
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

from eval_pipeline.defs import LAUNCHED_BY_TAG, build_definitions
from eval_pipeline.defs.assets.suite import reads_previous, what_changed
from eval_pipeline.defs.instance import DAGSTER_HOME_ENV, open_instance
from eval_pipeline.defs.launched import CLI
from eval_pipeline.defs.metadata import as_metadata, check_result
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import add_models
from eval_pipeline.defs.watch import observe_settings, observe_suite_files
from eval_pipeline.pipeline import pending_records, stage_key, stages
from eval_pipeline.store import file_lock
from eval_pipeline.suite import load_config

__all__ = ["EVALUATION_TAG", "RECORDED_AT", "ready_to_record", "record_pending", "reported_tags"]

#: On every event of a command's evaluation: the id of the stage run it came from (one per
#: job a run would have run: the day's inputs, a model's partition, the report).
EVALUATION_TAG = "eval_pipeline/evaluation"

#: Metadata of every materialization of a command's evaluation: when the command did it.
RECORDED_AT = "eval_pipeline/evaluated_at"

DATA_VERSION_TAG = "dagster/data_version"
CODE_VERSION_TAG = "dagster/code_version"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"

logger = logging.getLogger(__name__)


def ready_to_record(home: Path, suite_root: Path, day: date) -> Callable[[], int]:
    """Load what recording an evaluation of `suite_root` for `day` needs (Dagster, the
    suite's asset graph, the instance and its storage) while its stages run; the function
    that then records what is pending in `home` (`pipeline.Recorder` calls both)."""
    graph = _asset_graph(suite_root, day)
    instance = open_instance(home, command_line=True)
    return functools.partial(
        record_pending, home, loaded={(suite_root, day): graph}, instance=instance
    )


def record_pending(
    home: Path,
    *,
    loaded: Mapping[tuple[Path, date], Any] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> int:
    """Record every pending record of the instance in `home`, oldest first; how many stage
    runs were recorded. Waits for another process recording them. `loaded`: the asset
    graphs loaded ahead (`ready_to_record`), by suite folder and day; `instance`: the
    instance opened ahead, disposed of here."""
    # As a process recording in this instance expects (`open_instance`, `DagsterInstance.get`):
    # the command's own process never records, its recorder does.
    os.environ[DAGSTER_HOME_ENV] = str(home)
    recorded = 0
    with file_lock(home / ".record.lock"):
        pending = pending_records(home)
        if not pending:
            if instance is not None:
                instance.dispose()
            return 0
        with instance or open_instance(home, command_line=True) as opened:
            for path in pending:
                try:
                    recorded += _record(opened, path, loaded or {})
                except Exception:
                    # One record that cannot be recorded (its suite gone or no longer
                    # loading) must not hold back the others: it is set aside, named.
                    kept = path.with_suffix(".failed")
                    path.replace(kept)
                    logger.exception(
                        f"the record {path.name} could not be recorded; kept as {kept}"
                    )
                    continue
                path.unlink(missing_ok=True)
    return recorded


def _record(
    instance: dg.DagsterInstance, path: Path, loaded: Mapping[tuple[Path, date], Any]
) -> int:
    document = json.loads(path.read_text(encoding="utf-8"))
    day = date.fromisoformat(document["day"])
    root = Path(document["suite_root"])
    graph = loaded.get((root, day)) or _asset_graph(root, day)
    add_models(instance, document["models"])
    observe_suite_files(
        instance, {UNNAMED.key(name): version for name, version in document["observed"].items()}
    )
    # eval_config.yaml's grading and model settings, as the stages read them a moment ago.
    observe_settings(instance, load_config(root), document["models"], UNNAMED)
    latest = _Latest(instance, graph)
    recorded = 0
    for run in document["runs"]:
        if _recorded_before(latest, graph, run):
            continue  # recorded before the record could be removed
        for asset in run["assets"]:
            key = UNNAMED.key(asset)
            partition = _partition(graph, key, run)
            done = run["materialized"].get(_stage_key(graph, key, asset, run))
            if done is None:
                break  # the stage that failed: Dagster records no materialization of it
            _report(latest, graph, key, partition, stages.from_document(done), run, document)
        recorded += 1
    return recorded


class _Latest:
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


def _asset_graph(root: Path, day: date):
    """The suite's asset graph as its definitions declare it, with `day`'s partition."""
    definitions = build_definitions(root, dbt=False, history=False, from_day=day)
    return definitions.resolve_asset_graph()


def _partition(graph, key: dg.AssetKey, run: Mapping[str, Any]) -> str | None:
    """The partition of the asset that the run's stage materialized (by the asset's own
    partitions: none, the day, or the model and the day)."""
    partitions = graph.get(key).partitions_def
    if partitions is None:
        return None
    if isinstance(partitions, dg.MultiPartitionsDefinition):
        return dg.MultiPartitionKey({"date": run["day"], "model": run["model"]})
    return run["day"]


def _stage_key(graph, key: dg.AssetKey, asset: str, run: Mapping[str, Any]) -> str:
    partitions = graph.get(key).partitions_def
    model = run["model"] if isinstance(partitions, dg.MultiPartitionsDefinition) else None
    day = date.fromisoformat(run["day"]) if partitions is not None else None
    return stage_key(asset, model, day)


def _recorded_before(latest: _Latest, graph, run: Mapping[str, Any]) -> bool:
    """Whether the run's last materialization is already the instance's latest of its
    partition (the recorder stopped before it removed the record)."""
    done = [
        a for a in run["assets"] if _stage_key(graph, UNNAMED.key(a), a, run) in run["materialized"]
    ]
    if not done:
        return False
    key = UNNAMED.key(done[-1])
    record = latest.materialization(key, _partition(graph, key, run))
    return (
        record is not None
        and record.asset_materialization.tags.get(EVALUATION_TAG) == run["run_id"]
    )


def _report(
    latest: _Latest,
    graph,
    key: dg.AssetKey,
    partition: str | None,
    done: stages.Materialized,
    run: Mapping[str, Any],
    document: Mapping[str, Any],
) -> None:
    """Report one stage's materialization and then its checks, as a run's step would."""
    instance = latest.instance
    asset = key.path[-1]
    previous = None
    if reads_previous(asset):
        record = latest.materialization(key)
        previous = record.asset_materialization.metadata if record else None
    first = what_changed(asset, done, previous)
    node = graph.get(key)
    tags = {
        **reported_tags(
            instance,
            graph,
            key,
            partition,
            done.data_version,
            node.code_version or run["run_id"],
            latest=latest,
        ),
        LAUNCHED_BY_TAG: CLI,
        EVALUATION_TAG: run["run_id"],
    }
    metadata = {
        **as_metadata({**first, **done.metadata}),
        RECORDED_AT: dg.MetadataValue.timestamp(document["created_at"]),
    }
    instance.report_runless_asset_event(
        dg.AssetMaterialization(asset_key=key, partition=partition, metadata=metadata, tags=tags)
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
        # command's evaluation (one database of SQLite's storage for all its results), so
        # every evaluation of a partition is in the check's history.
        instance.report_dagster_event(
            dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
                event_specific_data=evaluation,
                job_name=RUNLESS_JOB_NAME,
            ),
            run_id=document.get("evaluation_id") or run["run_id"],
        )


def reported_tags(
    instance: dg.DagsterInstance,
    graph,
    key: dg.AssetKey,
    partition: str | None,
    data_version: str | None,
    code_version: str,
    *,
    latest: _Latest | None = None,
) -> dict[str, str]:
    """The tags a step of a run gives the asset's materialization of `partition`: its code
    version, each input's data version and event as the instance holds them now, and its
    data version (`data_version`, else Dagster's logical one from the code version and the
    inputs' versions), with the partition's dimensions of a multi-partitioned asset.
    `latest`: the instance's events as a record has read them so far."""
    latest = latest or _Latest(instance, graph)
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
    latest: _Latest, graph, key: dg.AssetKey, parent: dg.AssetKey, partition: str
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


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logger.setLevel(logging.INFO)
    home = Path(argv[0])
    if "--when-told" in argv[1:]:  # started as a command's stages start (`pipeline.Recorder`)
        sys.stdin.buffer.read()  # until the command closes it: its stages are done
    count = record_pending(home)
    logger.info(f"{count} stage run(s) recorded in the Dagster instance {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

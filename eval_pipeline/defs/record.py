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
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from eval_pipeline.defs import LAUNCHED_BY_TAG, build_definitions
from eval_pipeline.defs.assets.suite import reads_previous, what_changed
from eval_pipeline.defs.instance import DAGSTER_HOME_ENV, open_instance
from eval_pipeline.defs.launched import CLI
from eval_pipeline.defs.metadata import as_metadata
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import add_models
from eval_pipeline.defs.reporting import EVALUATION_TAG, Latest, partition_of, report_stage
from eval_pipeline.defs.watch import observe_settings, observe_suite_files
from eval_pipeline.pipeline import pending_records, stage_key, stages
from eval_pipeline.store import file_lock
from eval_pipeline.suite import load_config

__all__ = ["EVALUATION_TAG", "RECORDED_AT", "ready_to_record", "record_pending"]

#: Metadata of every materialization of a command's evaluation: when the command did it.
RECORDED_AT = "eval_pipeline/evaluated_at"

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
    latest = Latest(instance, graph)
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


def _asset_graph(root: Path, day: date):
    """The suite's asset graph as its definitions declare it, with `day`'s partition."""
    definitions = build_definitions(root, dbt=False, history=False, from_day=day)
    return definitions.resolve_asset_graph()


def _partition(graph, key: dg.AssetKey, run: Mapping[str, Any]) -> str | None:
    return partition_of(graph, key, run["model"], run["day"])


def _stage_key(graph, key: dg.AssetKey, asset: str, run: Mapping[str, Any]) -> str:
    partitions = graph.get(key).partitions_def
    model = run["model"] if isinstance(partitions, dg.MultiPartitionsDefinition) else None
    day = date.fromisoformat(run["day"]) if partitions is not None else None
    return stage_key(asset, model, day)


def _recorded_before(latest: Latest, graph, run: Mapping[str, Any]) -> bool:
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
    latest: Latest,
    graph,
    key: dg.AssetKey,
    partition: str | None,
    done: stages.Materialized,
    run: Mapping[str, Any],
    document: Mapping[str, Any],
) -> None:
    """Report one stage's materialization and then its checks, as a run's step would."""
    asset = key.path[-1]
    previous = None
    if reads_previous(asset):
        record = latest.materialization(key)
        previous = record.asset_materialization.metadata if record else None
    first = what_changed(asset, done, previous)
    report_stage(
        latest,
        graph,
        key,
        partition,
        done,
        tags={LAUNCHED_BY_TAG: CLI, EVALUATION_TAG: run["run_id"]},
        metadata={
            **as_metadata({**first, **done.metadata}),
            RECORDED_AT: dg.MetadataValue.timestamp(document["created_at"]),
        },
        work_id=run["run_id"],
        checks_run_id=document.get("evaluation_id") or run["run_id"],
    )


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

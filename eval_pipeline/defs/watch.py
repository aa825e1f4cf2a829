"""The sensor that observes the suite's files (tests, context files, dbt docs, eval_config.yaml's grading and model settings) and re-reads them when they change, so the UI marks the partitions they change unsynced within a minute."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs.assets.suite import SuiteAssets, file_versions
from eval_pipeline.defs.launched import AUTOMATION, LAUNCHED_BY_TAG
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.defs.settings import Observed, build_settings_sources, settings_versions
from eval_pipeline.suite import SuiteConfig, SuiteError, describe_error, first_line

if TYPE_CHECKING:
    from eval_pipeline.defs.chain import Job

WATCH_INTERVAL_S = 30
DATA_VERSION_TAG = "dagster/data_version"  # where Dagster records a materialization's version


def _recorded(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[str | None, int]:
    """The data version of the asset's latest materialization and its event id (0: none)."""
    records = instance.fetch_materializations(key, limit=1).records
    if not records or records[0].asset_materialization is None:
        return None, 0
    record = records[0]
    return record.asset_materialization.tags.get(DATA_VERSION_TAG), record.storage_id


def _observed(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None, *, reported: bool
) -> str | None:
    """The data version the source (partition) was last observed with (None: never): its
    latest observation, or for an external asset Dagster cannot observe, its latest reported
    materialization."""
    scope = dg.AssetRecordsFilter(
        asset_key=key, asset_partitions=[partition] if partition else None
    )
    if reported:
        records = instance.fetch_materializations(scope, limit=1).records
        event = records[0].asset_materialization if records else None
    else:
        records = instance.fetch_observations(scope, limit=1).records
        event = records[0].asset_observation if records else None
    return None if event is None else event.tags.get(DATA_VERSION_TAG)


def observations(
    instance: dg.DagsterInstance,
    versions: Mapping[dg.AssetKey, str] | Iterable[Observed],
    *,
    reported: Collection[dg.AssetKey] = (),
) -> list[dg.AssetObservation | dg.AssetMaterialization]:
    """An event for each source (`test_files`, `context_files`, `grading_settings`, a
    model's `model_settings`) whose version differs from the one it was last observed with;
    none for those that did not move. The `reported` ones (eval_config.yaml's grading
    settings) are reported as materializations: for an unpartitioned external asset, which
    Dagster cannot observe, its staleness reads the version of the last materialization
    only, while a run records the last observation it finds as what it read; the two would
    disagree and the grading rules would look unsynced for good. A model's settings
    (partitioned by model) keep their observations, which both read alike."""
    if isinstance(versions, Mapping):
        versions = [(key, None, version) for key, version in versions.items()]
    events: list[dg.AssetObservation | dg.AssetMaterialization] = []
    for key, partition, version in versions:
        external = key in reported
        if _observed(instance, key, partition, reported=external) == version:
            continue
        event = dg.AssetMaterialization if external else dg.AssetObservation
        events.append(event(asset_key=key, partition=partition, tags={DATA_VERSION_TAG: version}))
    return events


def observe_suite_files(instance: dg.DagsterInstance, versions: Mapping[dg.AssetKey, str]) -> None:
    """Record, without a run, what the files are now, before a run reads them: the run's
    provenance then names the version it read, and the sources never look newer than what
    read them (a command-line evaluation does this before its inputs run)."""
    for observation in observations(instance, versions):
        instance.report_runless_asset_event(observation)


def observe_settings(
    instance: dg.DagsterInstance,
    config: SuiteConfig,
    models: Iterable[str],
    names: SuiteNames,
) -> None:
    """`observe_suite_files` for eval_config.yaml's grading settings and the `models`'
    settings, before a command-line evaluation reads them."""
    sources = build_settings_sources(names)
    reported = [sources.grading.key]
    versions = settings_versions(config, models, sources)
    for event in observations(instance, versions, reported=reported):
        instance.report_runless_asset_event(event)


def _problem_line(error: Exception) -> str:
    """One line naming the file and field to fix (and how many more problems there are)."""
    if isinstance(error, SuiteError) and error.problems:
        more = len(error.problems) - 1
        extra = f" (and {more} more problem(s))" if more else ""
        return f"{first_line(str(error.problems[0]))}{extra}; fix it, the last read stays in use"
    return f"{first_line(describe_error(error))}; fix it, the last read stays in use"


def build_watch_sensor(
    suite_root: str,
    *,
    name: str,
    inputs: SuiteAssets,
    job: Job,
    names: SuiteNames,
) -> dg.SensorDefinition:
    """`watch_suite_files` (named `name`): every 30 s, hash the test files and the agent's
    context as the assets would, and observe the source assets (`test_files`,
    `context_files`) whose hash moved, without a run. When a hash differs
    from the one its reader last materialized, materialize that reader: Dagster carries
    staleness one step down, so the runs and grades show unsynced only once `test_cases`
    (or `agent_context`) has the new data version, and its metadata lists the tests or
    files that changed. On an instance where neither reader was ever materialized it
    requests no run (none at start-up)."""
    settings = build_settings_sources(names)
    reader_of = {
        inputs.test_files.key: inputs.test_cases.key,
        inputs.context_files.key: inputs.agent_context.key,
        settings.grading.key: inputs.grading_rules.key,
    }

    @dg.sensor(
        name=name,
        minimum_interval_seconds=WATCH_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job=job,  # `read_suite`: its runs re-read only the readers whose files moved
        description="Re-reads the test files and the agent context when they change on disk, "
        "so the runs and grades they affect show as unsynced within a minute.",
    )
    def watch_suite_files(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        suite = SuiteResource(root=suite_root)
        models = context.instance.get_dynamic_partitions(names.models_partitions.name)
        try:
            files = file_versions(suite.load(), suite.agent_context(), names)
            versions = [(key, None, version) for key, version in files.items()]
            versions += settings_versions(suite.config(), models, settings)
        except (SuiteError, OSError) as error:
            # A half-written test file is normal while someone edits: say what is wrong and
            # look again next tick; the last good materialization stays.
            return dg.SensorResult(skip_reason=_problem_line(error))
        observed = observations(context.instance, versions, reported=[settings.grading.key])
        # A model's settings have no reader: its runs read them, and show unsynced at once.
        current = {reader_of[key]: version for key, _, version in versions if key in reader_of}
        recorded_versions = {key: _recorded(context.instance, key) for key in current}
        if all(recorded is None for recorded, _ in recorded_versions.values()):
            # A new instance (the UI started before any evaluation): nothing depends on the
            # files yet, so there is nothing to mark unsynced; the first evaluation reads them.
            return dg.SensorResult(
                asset_events=observed,
                skip_reason="the suite was never read here; its first evaluation reads it",
            )
        changed, seen = [], []
        for key, version in current.items():
            recorded, event_id = recorded_versions[key]
            # A reader never materialized here has nothing downstream to mark unsynced.
            if recorded is not None and recorded != version:
                changed.append(key)
                # Unique per (new version, last materialization): an edit undone later is
                # requested again, while a request already made is not repeated.
                seen.append(f"{key.to_user_string()}:{version}@{event_id}")
        if not changed:
            return dg.SensorResult(
                asset_events=observed,
                skip_reason="the test files and the context are as last read",
            )
        return dg.SensorResult(
            asset_events=observed,
            run_requests=[
                dg.RunRequest(
                    run_key=";".join(seen),
                    asset_selection=changed,
                    tags={LAUNCHED_BY_TAG: AUTOMATION},
                )
            ],
        )

    return watch_suite_files

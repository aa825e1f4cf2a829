"""The sensor that observes the suite's files (tests, context files, dbt docs) and re-reads them when they change, so the UI marks the partitions they change unsynced within a minute."""

from collections.abc import Mapping

import dagster as dg

from eval_pipeline.defs.assets.suite import SuiteAssets, file_versions
from eval_pipeline.defs.launched import AUTOMATION, LAUNCHED_BY_TAG
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.suite import SuiteError, describe_error, first_line

WATCH_INTERVAL_S = 30
DATA_VERSION_TAG = "dagster/data_version"  # where Dagster records a materialization's version


def _recorded(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[str | None, int]:
    """The data version of the asset's latest materialization and its event id (0: none)."""
    records = instance.fetch_materializations(key, limit=1).records
    if not records or records[0].asset_materialization is None:
        return None, 0
    record = records[0]
    return record.asset_materialization.tags.get(DATA_VERSION_TAG), record.storage_id


def _observed(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """The data version of the source asset's latest observation (None: never observed)."""
    records = instance.fetch_observations(key, limit=1).records
    if not records or records[0].asset_observation is None:
        return None
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG)


def observations(
    instance: dg.DagsterInstance, versions: Mapping[dg.AssetKey, str]
) -> list[dg.AssetObservation]:
    """An observation of each source asset (`test_files`, `context_files`) whose files hash
    to another version than it was last observed with; none for those that did not move."""
    return [
        dg.AssetObservation(asset_key=key, tags={DATA_VERSION_TAG: version})
        for key, version in versions.items()
        if _observed(instance, key) != version
    ]


def observe_suite_files(instance: dg.DagsterInstance, versions: Mapping[dg.AssetKey, str]) -> None:
    """Record, without a run, what the files are now, before a run reads them: the run's
    provenance then names the version it read, and the sources never look newer than what
    read them (a command-line evaluation does this before its inputs run)."""
    for observation in observations(instance, versions):
        instance.report_runless_asset_event(observation)


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
    reader_of = {
        inputs.test_files.key: inputs.test_cases.key,
        inputs.context_files.key: inputs.agent_context.key,
    }

    @dg.sensor(
        name=name,
        minimum_interval_seconds=WATCH_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        target=dg.AssetSelection.assets(*reader_of.values()),
        description="Re-reads the test files and the agent context when they change on disk, "
        "so the runs and grades they affect show as unsynced within a minute.",
    )
    def watch_suite_files(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        suite = SuiteResource(root=suite_root)
        try:
            versions = file_versions(suite.load(), suite.agent_context(), names)
        except (SuiteError, OSError) as error:
            # A half-written test file is normal while someone edits: say what is wrong and
            # look again next tick; the last good materialization stays.
            return dg.SensorResult(skip_reason=_problem_line(error))
        observed = observations(context.instance, versions)
        current = {reader_of[key]: version for key, version in versions.items()}
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
            if recorded != version:
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

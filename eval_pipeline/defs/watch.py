"""The sensor that notices an edit to the suite's files (tests, context files, dbt docs) and re-reads them, so the UI marks the partitions they change unsynced within a minute."""

import dagster as dg

from eval_pipeline.defs.launched import AUTOMATION, LAUNCHED_BY_TAG
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
    test_cases: dg.AssetsDefinition,
    agent_context: dg.AssetsDefinition,
) -> dg.SensorDefinition:
    """`watch_suite_files` (named `name`): every 30 s, hash the test files and the agent's context as the
    assets would; when a hash differs from the one last materialized, materialize that
    asset. On an instance where neither was ever materialized it requests nothing (no run
    at start-up). Its new data version marks each model's runs unsynced (Dagster carries
    staleness only one step down, so the observation must be the inputs' own
    materialization), and its metadata lists the tests or files that changed."""

    @dg.sensor(
        name=name,
        minimum_interval_seconds=WATCH_INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        target=dg.AssetSelection.assets(test_cases, agent_context),
        description="Re-reads the test files and the agent context when they change on disk, "
        "so the runs and grades they affect show as unsynced within a minute.",
    )
    def watch_suite_files(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        suite = SuiteResource(root=suite_root)
        try:
            current = {
                test_cases.key: suite.load().hash,
                agent_context.key: suite.agent_context().hash,
            }
        except (SuiteError, OSError) as error:
            # A half-written test file is normal while someone edits: say what is wrong and
            # look again next tick; the last good materialization stays.
            return dg.SensorResult(skip_reason=_problem_line(error))
        recorded_versions = {key: _recorded(context.instance, key) for key in current}
        if all(recorded is None for recorded, _ in recorded_versions.values()):
            # A new instance (the UI started before any evaluation): nothing depends on the
            # files yet, so there is nothing to mark unsynced; the first evaluation reads them.
            return dg.SensorResult(
                skip_reason="the suite was never read here; its first evaluation reads it"
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
            return dg.SensorResult(skip_reason="the test files and the context are as last read")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=";".join(seen),
                    asset_selection=changed,
                    tags={LAUNCHED_BY_TAG: AUTOMATION},
                )
            ]
        )

    return watch_suite_files

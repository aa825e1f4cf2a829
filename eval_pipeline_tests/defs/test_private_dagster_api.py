"""The few private Dagster names the Dagster layer uses, pinned to the minor they were checked on.

Each has no public equivalent (see the comment where it is imported): the staleness resolver
behind the UI's "Unsynced", the asset-graph view it needs, an instance reference with
overrides, the type of a job `define_asset_job` returns, what a tick already requests (an
undocumented field of the public `AutomationContext`), and what the command's record
(`defs/reporting.py`) needs to report work done outside a run as a run's step records it: the
provenance tags and versions a step computes, the target a check result names, the tags of a
multi-partition key, and the job name of a runless event. A new Dagster minor may move them or
change what they do; these tests fail first, so that the use is looked at again before the pin
moves. Each is checked doing what we rely on, not only imported: cheaply here, and against a
real run and a real instance in the two tests marked slow.
"""

from __future__ import annotations

import uuid
import warnings
from datetime import UTC, datetime

import dagster as dg
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.definitions.data_version import (
    DEFAULT_DATA_VERSION,
    NULL_EVENT_POINTER,
    CachingStaleStatusResolver,
    StaleStatus,
    compute_logical_data_version,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)
from dagster._core.definitions.partitions.utils.multi import get_tags_from_multi_partition_key
from dagster._core.instance.utils import RUNLESS_JOB_NAME

from eval_pipeline.defs.reporting import reported_tags

CHECKED_ON = (1, 13)

DAY, FIRST = "2026-11-30", "2026-11-29"
DAYS = dg.DailyPartitionsDefinition(start_date="2026-11-01", end_offset=1)
MODELS = dg.DynamicPartitionsDefinition(name="models")
DATA_VERSION = "dagster/data_version"


with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)  # as defs/assets/suite.py makes its sources

    @dg.observable_source_asset
    def files() -> dg.DataVersion:
        """As test_files: observed (the test reports its observations), so it has a version."""
        return dg.DataVersion("unused")


@dg.asset(partitions_def=DAYS, code_version="inputs-1", deps=[files])
def day_inputs() -> None:
    """As test_cases: one partition per day, reading an observed source."""


@dg.asset(
    partitions_def=dg.MultiPartitionsDefinition({"date": DAYS, "model": MODELS}),
    code_version="runs-1",
    deps=[day_inputs],
)
def model_runs() -> None:
    """As agent_runs: one partition per model and day, reading the day's partition."""


DEFS = dg.Definitions(assets=[files, day_inputs, model_runs])


def test_the_private_dagster_names_are_where_they_were_checked():
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )
    from dagster._core.instance.ref import InstanceRef

    assert {StaleStatus.FRESH, StaleStatus.STALE, StaleStatus.MISSING} <= set(StaleStatus)
    assert callable(CachingStaleStatusResolver.get_status)
    assert callable(InstanceRef.from_dir)
    assert AssetGraphView and TemporalContext
    # defs/chain.py annotates the jobs it is given with it.
    assert isinstance(dg.define_asset_job("a_job"), UnresolvedAssetJobDefinition)
    # defs/conditions.py reads what a tick already requests (AutomationContext's field).
    assert "request_subsets_by_key" in dg.AutomationContext.__annotations__
    minor = tuple(int(part) for part in dg.__version__.split(".")[:2])
    assert minor <= CHECKED_ON, (
        f"Dagster {dg.__version__} is newer than {CHECKED_ON}: check the private names used "
        "in defs/conditions.py, defs/instance.py, defs/chain.py and defs/reporting.py (and the "
        "fast lane's guard in eval_pipeline_tests/fast_lane.py), then move CHECKED_ON"
    )


def test_a_steps_provenance_is_spelled_and_computed_as_the_record_spells_it():
    """The tags a step of a run writes, and the logical data version it computes: a digest of
    the code version and the inputs' versions, which moves when either moves."""
    parent = dg.AssetKey(["suite", "day_inputs"])
    assert get_input_data_version_tag(parent) == "dagster/input_data_version/suite/day_inputs"
    assert get_input_event_pointer_tag(parent) == "dagster/input_event_pointer/suite/day_inputs"
    # What an input never materialized nor observed reads as.
    assert DEFAULT_DATA_VERSION.value == "INITIAL"
    assert NULL_EVENT_POINTER == "NULL"

    version = compute_logical_data_version("runs-1", {parent: dg.DataVersion("a")})
    assert version == compute_logical_data_version("runs-1", {parent: dg.DataVersion("a")})
    assert version != compute_logical_data_version("runs-2", {parent: dg.DataVersion("a")})
    assert version != compute_logical_data_version("runs-1", {parent: dg.DataVersion("b")})

    key = dg.MultiPartitionKey({"date": DAY, "model": "m"})
    assert get_tags_from_multi_partition_key(key) == {
        "dagster/partition/date": DAY,
        "dagster/partition/model": "m",
    }

    # A check result names the materialization it checked by its event's storage id.
    target = AssetCheckEvaluationTargetMaterializationData(storage_id=7, run_id="", timestamp=1.0)
    evaluation = dg.AssetCheckEvaluation(
        asset_key=parent, check_name="a_check", passed=True, target_materialization_data=target
    )
    assert evaluation.target_materialization_data.storage_id == 7
    # A runless event's run and job are both the empty name (RUNLESS_RUN_ID is "" too).
    assert RUNLESS_JOB_NAME == ""


@pytest.mark.slow  # runs Dagster
def test_the_tags_the_record_gives_a_materialization_are_those_a_run_gives_it():
    """`reported_tags` computes, with the private helpers above, what a run's step writes on
    a materialization: code version, data version, each input's version and event (a source's
    observation, a daily parent read by a model-and-day partition), the partition's dimensions;
    and Dagster's staleness reads materializations reported so, outside a run, as fresh until
    their input moves."""
    graph = DEFS.resolve_asset_graph()
    runs_partition = dg.MultiPartitionKey({"date": DAY, "model": "m"})
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", ["m"])
        # A day read before the source was ever observed: its input is Dagster's default.
        dg.materialize(
            [files, day_inputs], selection=[day_inputs], partition_key=FIRST, instance=instance
        )
        unobserved = reported_tags(instance, graph, day_inputs.key, FIRST, None, "inputs-1")
        # As observe_suite_files records the suite's files before the stages read them.
        instance.report_runless_asset_event(
            dg.AssetObservation(files.key, tags={DATA_VERSION: "files-1"})
        )
        dg.materialize(
            [files, day_inputs], selection=[day_inputs], partition_key=DAY, instance=instance
        )
        inputs_tags = reported_tags(instance, graph, day_inputs.key, DAY, None, "inputs-1")
        dg.materialize(
            [day_inputs, model_runs],
            selection=[model_runs],
            partition_key=runs_partition,
            instance=instance,
        )
        runs_tags = reported_tags(instance, graph, model_runs.key, runs_partition, None, "runs-1")

        for key, partition, reported in [
            (day_inputs.key, FIRST, unobserved),
            (day_inputs.key, DAY, inputs_tags),
            (model_runs.key, runs_partition, runs_tags),
        ]:
            [record] = instance.fetch_materializations(
                dg.AssetRecordsFilter(key, asset_partitions=[partition]), limit=1
            ).records
            written = record.asset_materialization.tags
            assert reported == {tag: written[tag] for tag in reported}, key
            provenance = {t for t in written if t.startswith(("dagster/input_", "dagster/d"))}
            assert provenance <= set(reported), key
        assert unobserved[get_input_data_version_tag(files.key)] == DEFAULT_DATA_VERSION.value
        assert unobserved[get_input_event_pointer_tag(files.key)] == NULL_EVENT_POINTER
        assert inputs_tags[get_input_data_version_tag(files.key)] == "files-1"
        assert inputs_tags[get_input_event_pointer_tag(files.key)] != NULL_EVENT_POINTER

    # The same work reported outside a run, as the command's record reports it: Dagster's
    # staleness reads it as fresh, and as unsynced once the files it read change.
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", ["m"])

        def report(key: dg.AssetKey, partition: str, code_version: str) -> None:
            tags = reported_tags(instance, graph, key, partition, None, code_version)
            instance.report_runless_asset_event(
                dg.AssetMaterialization(asset_key=key, partition=partition, tags=tags)
            )

        def status(key: dg.AssetKey, partition: str) -> StaleStatus:
            view = AssetGraphView(
                temporal_context=TemporalContext(
                    effective_dt=datetime.now(UTC), last_event_id=None
                ),
                instance=instance,
                asset_graph=graph,
            )
            return CachingStaleStatusResolver(instance, graph, view).get_status(key, partition)

        instance.report_runless_asset_event(
            dg.AssetObservation(files.key, tags={DATA_VERSION: "files-1"})
        )
        report(day_inputs.key, DAY, "inputs-1")
        report(model_runs.key, runs_partition, "runs-1")
        assert instance.get_runs() == []
        assert status(day_inputs.key, DAY) is StaleStatus.FRESH
        assert status(model_runs.key, runs_partition) is StaleStatus.FRESH
        # The suite's files change: the day's partition that read them is unsynced (what
        # defs/conditions.py asks of a parent partition; Dagster does not carry it on to
        # model_runs, that condition does).
        instance.report_runless_asset_event(
            dg.AssetObservation(files.key, tags={DATA_VERSION: "files-2"})
        )
        assert status(day_inputs.key, DAY) is StaleStatus.STALE


@pytest.mark.slow  # records to an instance
def test_a_partitions_check_result_is_kept_for_each_evaluation_only_under_its_own_id():
    """Why `_report` stores a partition's check result with `report_dagster_event` under the
    evaluation's id: Dagster's storage keeps one runless result per check and partition (the
    second is refused), and the results reported so are each in the check's history, as
    runless ones otherwise are. When the first half stops holding, the public
    `report_runless_asset_event` can do it again."""
    key = dg.AssetKey("model_runs")
    check = dg.AssetCheckKey(key, "no_regression")

    def evaluation(instance: dg.DagsterInstance) -> dg.AssetCheckEvaluation:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=DAY))
        [written] = instance.fetch_materializations(
            dg.AssetRecordsFilter(key, asset_partitions=[DAY]), limit=1
        ).records
        return dg.AssetCheckEvaluation(
            asset_key=key,
            check_name=check.name,
            passed=True,
            partition=DAY,
            target_materialization_data=AssetCheckEvaluationTargetMaterializationData(
                storage_id=written.storage_id, run_id=written.run_id, timestamp=written.timestamp
            ),
        )

    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(evaluation(instance))
        with pytest.raises(Exception, match="UNIQUE"):
            instance.report_runless_asset_event(evaluation(instance))
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=10)
        assert len(history) == 1

    with dg.DagsterInstance.ephemeral() as instance:
        ids = [str(uuid.uuid4()) for _ in range(2)]
        for evaluation_id in ids:
            instance.report_dagster_event(
                dg.DagsterEvent(
                    event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION.value,
                    event_specific_data=evaluation(instance),
                    job_name=RUNLESS_JOB_NAME,
                ),
                run_id=evaluation_id,
            )
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=10)
        assert [entry.run_id for entry in history] == ids[::-1]  # newest first
        assert all(entry.partition == DAY and entry.evaluation.passed for entry in history)
        # Stored as a runless event is: no run behind it, the same job name.
        assert instance.get_runs() == []
        [materialization] = instance.fetch_materializations(key, limit=1).records
        assert history[0].event.job_name == materialization.event_log_entry.job_name


@pytest.mark.slow  # records to an instance
def test_an_instance_opened_for_a_record_parses_the_storage_migrations_once(tmp_path):
    """`open_instance(command_line=True)` has Alembic parse Dagster's migration scripts once
    in the process (`ScriptDirectory.from_config` keeps what it parsed), where Dagster asks
    for them for every SQLite database it checks; the heads are those a fresh parse finds,
    and everything is written as before, a new shard included."""
    from alembic.script import ScriptDirectory
    from dagster._core.events import EngineEventData
    from dagster._core.storage.sql import get_alembic_config

    from eval_pipeline.defs.instance import default_instance_yaml, open_instance

    (tmp_path / "dagster.yaml").write_text(default_instance_yaml())
    key = dg.AssetKey("model_runs")
    with open_instance(tmp_path, command_line=True) as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=DAY))
    config = get_alembic_config(dg.__file__)
    parsed = ScriptDirectory.from_config(config)
    assert ScriptDirectory.from_config(get_alembic_config(dg.__file__)) is parsed
    fresh = ScriptDirectory(parsed.dir)
    assert parsed.get_heads() == fresh.get_heads()
    with open_instance(tmp_path, command_line=True) as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=FIRST))
        evaluation_id = str(uuid.uuid4())
        instance.report_dagster_event(
            dg.DagsterEvent(
                event_type_value=dg.DagsterEventType.ENGINE_EVENT.value,
                job_name=RUNLESS_JOB_NAME,
                message="made in its own shard",
                event_specific_data=EngineEventData(),
            ),
            run_id=evaluation_id,
        )
        assert len(instance.all_logs(evaluation_id)) == 1
        done = instance.fetch_materializations(key, limit=10).records
        assert sorted(record.partition_key for record in done) == [FIRST, DAY]

"""examples/two_suites, loaded as `dg` loads it: two suites and a team's own asset and `dbt` resource in one code location, neither suite reaching what is not its own."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.launched import LAUNCHED_BY_TAG
from eval_pipeline_tests.defs.test_loading_writes_nothing import snapshot

pytestmark = pytest.mark.slow  # loads two suites' definitions, the history project's included

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_suites"
SUITES = ("sales", "support")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, history_dbt_target: Path):
    """The example copied (so its suites' folders are the test's), its definitions loaded from
    its defs folder in process, and what its suites' folders held before."""
    root = Path(shutil.copytree(EXAMPLE, tmp_path_factory.mktemp("example") / "two_suites"))
    before = {name: snapshot(root / "suites" / name) for name in SUITES}
    sys.path.insert(0, str(root / "src"))
    try:
        from two_suites.definitions import defs

        loaded = defs()
    finally:
        sys.path.remove(str(root / "src"))
        for module in [m for m in sys.modules if m == "two_suites" or m.startswith("two_suites.")]:
            del sys.modules[module]
    return root, loaded, before


def test_both_suites_load_prefixed_beside_the_teams_own_asset_and_dbt_resource(project):
    root, defs, before = project
    dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    for name in SUITES:
        assert {f"{name}/agent_runs", f"{name}/grades", f"{name}/history/regressions"} <= keys
        assert defs.resolve_job_def(f"{name}__evaluate_model_day")
        assert f"{name}_suite" in defs.resources
    assert "weekly_kpis" in keys
    assert "agent_runs" not in keys  # nothing of a suite is left unprefixed
    assert type(defs.resources["dbt"]).__name__ == "TeamDbt"  # the team's, not a suite's
    for name in SUITES:
        assert snapshot(root / "suites" / name) == before[name], f"loading wrote into {name}"


def test_each_suite_has_its_owners_by_attribute_or_by_dagsters_post_processing(project):
    _, defs, _ = project
    graph = defs.resolve_asset_graph()
    owners = {"sales": ["team:sales-analytics"], "support": ["support-lead@example.com"]}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        expected = owners.get(key.path[0], [])  # the team's own asset keeps none
        assert list(node.owners) == expected, key.to_user_string()
        if key.path[0] == "support":
            assert node.tags.get("domain") == "support", key.to_user_string()
    # the observed files too, which a post-processing that cannot reach sources would miss
    assert graph.get(dg.AssetKey(["support", "test_files"])).is_observable


def test_each_suites_automation_targets_its_own_assets_only(project):
    _, defs, _ = project
    graph = defs.resolve_asset_graph()
    for name in SUITES:
        sensor = defs.resolve_sensor_def(f"{name}__evaluation_automation")
        assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
        targeted = sensor.asset_selection.resolve(graph)
        assert dg.AssetKey(f"{name}/grades".split("/")) in targeted
        assert all(key.path[0] == name for key in targeted), "it reaches assets not its own"


def test_a_run_of_the_teams_own_asset_is_left_untagged(project):
    _, defs, _ = project
    with dg.DagsterInstance.ephemeral() as instance:
        job = defs.resolve_implicit_job_def_def_for_assets([dg.AssetKey("weekly_kpis")])
        result = job.execute_in_process(
            instance=instance, asset_selection=[dg.AssetKey("weekly_kpis")]
        )
        run = instance.get_run_by_id(result.run_id)
        started = next(
            e.dagster_event
            for e in instance.all_logs(run.run_id)
            if e.dagster_event and e.dagster_event.event_type_value == "PIPELINE_START"
        )
        for name in SUITES:
            sensor = defs.resolve_sensor_def(f"{name}__tag_run_launcher")
            sensor(
                dg.build_run_status_sensor_context(
                    sensor_name=sensor.name,
                    dagster_instance=instance,
                    dagster_run=run,
                    dagster_event=started,
                )
            )
        assert LAUNCHED_BY_TAG not in instance.get_run_by_id(run.run_id).tags

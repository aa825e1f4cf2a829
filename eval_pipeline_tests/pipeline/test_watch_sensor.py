"""`watch_suite_files` on a new instance: no run at start-up, the first edit after an
evaluation is still noticed."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline_tests.pipeline.small_suite import materialize

pytestmark = pytest.mark.slow  # it starts Dagster runs


def watch_tick(defs: dg.Definitions, instance: dg.DagsterInstance):
    sensor = defs.resolve_sensor_def("watch_suite_files")
    with dg.build_sensor_context(instance=instance, definitions=defs) as context:
        return sensor.evaluate_tick(context)


def test_a_new_instance_gets_no_run_at_start_up_and_an_edit_after_the_first_read_does(
    small_suite, instance
):
    defs = small_suite.definitions()
    first = watch_tick(defs, instance)
    assert first.run_requests == []
    assert first.skip_message == "the suite was never read here; its first evaluation reads it"

    assert materialize(defs, ["test_cases", "agent_context"], instance=instance).success
    assert watch_tick(defs, instance).run_requests == []
    small_suite.edit_case("total_revenue", prompt="What is the total revenue, in USD?")
    (request,) = watch_tick(defs, instance).run_requests
    assert request.asset_selection == [dg.AssetKey("test_cases")]

"""`watch_suite_files` on a new instance: no run at start-up, the first edit after an
evaluation is still noticed, observed on the `test_files` source first."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from eval_pipeline_tests.pipeline.automation import run_requested, watch_tick
from eval_pipeline_tests.pipeline.small_suite import materialize

pytestmark = pytest.mark.slow  # it starts Dagster runs


def test_a_new_instance_gets_no_run_at_start_up_and_an_edit_after_the_first_read_does(
    small_suite, instance
):
    defs = small_suite.definitions()
    first = watch_tick(defs, instance)
    assert first.run_requests == []
    assert first.skip_message == "the suite was never read here; its first evaluation reads it"

    assert materialize(defs, ["test_cases", "agent_context"], instance=instance).success
    assert watch_tick(defs, instance).run_requests == []
    assert source_status(defs, instance) == (StaleStatus.FRESH, [])
    small_suite.edit_case("total_revenue", prompt="What is the total revenue, in USD?")
    tick = watch_tick(defs, instance)
    assert [event.asset_key for event in tick.asset_events] == [dg.AssetKey("test_files")]
    (request,) = tick.run_requests
    assert request.asset_selection == [dg.AssetKey("test_cases")]
    # what the UI shows until the requested run has read the files
    assert source_status(defs, instance) == (
        StaleStatus.STALE,
        [("test_files", "has a new data version")],
    )
    run_requested(defs, instance, request)
    assert source_status(defs, instance) == (StaleStatus.FRESH, [])
    assert watch_tick(defs, instance).asset_events == []  # observed once per version


def source_status(defs: dg.Definitions, instance: dg.DagsterInstance):
    """test_cases' status and root causes, as the UI computes them."""
    resolver = get_stale_status_resolver(instance, list(defs.resolve_asset_graph().assets_defs))
    key = dg.AssetKey("test_cases")
    causes = [
        (cause.key.asset_key.to_user_string(), cause.reason)
        for cause in resolver.get_stale_root_causes(key)
    ]
    return resolver.get_status(key), causes

"""The few private Dagster names the Dagster layer uses, pinned to the minor they were checked on.

Each has no public equivalent (see the comment where it is imported): the staleness resolver
behind the UI's "Unsynced", the asset-graph view it needs, and an instance reference with
overrides. A new Dagster minor may move them; this test fails first, so that the use is
looked at again before the pin moves.
"""

from __future__ import annotations

import dagster

CHECKED_ON = (1, 13)


def test_the_private_dagster_names_are_where_they_were_checked():
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.instance.ref import InstanceRef

    assert {StaleStatus.FRESH, StaleStatus.STALE, StaleStatus.MISSING} <= set(StaleStatus)
    assert callable(CachingStaleStatusResolver.get_status)
    assert callable(InstanceRef.from_dir)
    assert AssetGraphView and TemporalContext
    minor = tuple(int(part) for part in dagster.__version__.split(".")[:2])
    assert minor <= CHECKED_ON, (
        f"Dagster {dagster.__version__} is newer than {CHECKED_ON}: check the private names "
        "used in defs/conditions.py and defs/instance.py, then move CHECKED_ON"
    )

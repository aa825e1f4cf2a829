"""The fast lane's promise about Dagster: a test not marked `slow` starts no Dagster run and records nothing in a Dagster instance.

A test may build definitions and read them (cheap); running them is what costs seconds. Every
way to run or record ends in one of three places, which `refuse_dagster_work` makes refuse:
a run is created (`dg.materialize`, `execute_in_process`, a submitted or queued run), a run is
written as it is (`DagsterInstance.add_run`), or an event is stored (a run's, or reported
outside a run: `report_runless_asset_event`, the command's record). Two of the names are
private: test_fast_lane.py proves they still catch `dg.materialize`, `execute_in_process`
and runless reporting.
"""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import pytest
from dagster._core.instance.runs.run_domain import RunDomain

#: (owner, method, what a test that reaches it does)
DAGSTER_WORK = (
    (RunDomain, "create_run", "starts a Dagster run"),
    (dg.DagsterInstance, "add_run", "writes a run in a Dagster instance"),
    (dg.DagsterInstance, "handle_new_event", "records an event in a Dagster instance"),
)


def refuse_dagster_work(monkeypatch: pytest.MonkeyPatch, test: str, caught: list[str]) -> None:
    """Make every Dagster run and every event stored in an instance fail, naming `test`. The
    message is also kept in `caught`: code that swallows the error (the record sets aside
    what it could not record) still fails the test (the conftest's report hook)."""
    for owner, method, what in DAGSTER_WORK:
        monkeypatch.setattr(owner, method, _refusal(f"{test} {what}: mark it slow", caught))


def _refusal(message: str, caught: list[str]) -> Callable[..., None]:
    def refuse(*_args, **_kwargs) -> None:
        caught.append(message)
        raise AssertionError(message)

    return refuse

"""The fast lane's guard catches what would make `-m "not slow"` run Dagster: a run however it is started, an event recorded in an instance, even when the code under test swallows the refusal."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline_tests.fast_lane import refuse_dagster_work

REPOSITORY = Path(__file__).resolve().parents[1]


@dg.asset
def one() -> None:
    return None


def test_a_dagster_run_or_record_is_refused_and_named(monkeypatch):
    caught: list[str] = []
    refuse_dagster_work(monkeypatch, "the_test", caught)
    job = dg.Definitions(assets=[one], jobs=[dg.define_asset_job("one_job")]).resolve_job_def(
        "one_job"
    )
    with dg.DagsterInstance.ephemeral() as instance:
        with pytest.raises(AssertionError, match="the_test starts a Dagster run: mark it slow"):
            dg.materialize([one], instance=instance)
        with pytest.raises(AssertionError, match="the_test starts a Dagster run"):
            job.execute_in_process(instance=instance)
        with pytest.raises(AssertionError, match="the_test records an event in a Dagster instance"):
            instance.report_runless_asset_event(dg.AssetMaterialization("one"))
        with pytest.raises(AssertionError, match="the_test writes a run in a Dagster instance"):
            instance.add_run(dg.DagsterRun(job_name="one_job"))
        assert instance.get_runs() == []
    assert len(caught) == 4


SWALLOWING = """
import dagster as dg
import pytest


def test_reports_and_swallows_the_refusal():
    with dg.DagsterInstance.ephemeral() as instance:
        try:  # as the command's record sets aside a record it could not write
            instance.report_runless_asset_event(dg.AssetMaterialization("one"))
        except Exception:
            pass


@pytest.mark.slow
def test_marked_slow_may_record():
    with dg.DagsterInstance.ephemeral() as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization("one"))
        assert instance.fetch_materializations(dg.AssetKey("one"), limit=1).records
"""


@pytest.mark.slow  # starts pytest
def test_a_refusal_the_code_swallows_still_fails_the_test(tmp_path: Path):
    (tmp_path / "test_swallowing.py").write_text(textwrap.dedent(SWALLOWING), encoding="utf-8")
    path = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    inner = ["-p", "eval_pipeline_tests.conftest", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *inner, "test_swallowing.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), *path])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    # Its failure names it and what it did; the one marked slow recorded and passed.
    assert (
        "test_swallowing.py::test_reports_and_swallows_the_refusal records an event in a "
        "Dagster instance: mark it slow"
    ) in done.stdout, done.stdout

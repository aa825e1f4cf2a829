"""A Dagster run reads the suite's files once, not once per asset that needs the suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline import pipeline
from eval_pipeline.defs import INPUTS_JOB, build_definitions
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.pipeline.small_suite import DAY, SmallSuite, open_small_suite

pytestmark = pytest.mark.slow  # Dagster runs


@pytest.fixture
def small_suite(tmp_path: Path) -> Iterator[SmallSuite]:
    with open_small_suite(tmp_path / "suite") as suite:
        yield suite


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders `load_suite` parsed for the Dagster layer."""
    parsed: list[Path] = []

    def counting(root):
        parsed.append(root)
        return load_suite(root)

    monkeypatch.setattr(pipeline._loaded_suite, "load_suite", counting)
    return parsed


def test_a_run_launched_from_the_ui_reads_the_suite_once(small_suite: SmallSuite, loads) -> None:
    # The day's inputs: three assets read the suite (the tests, the references, the variants).
    defs = build_definitions(small_suite.root, dbt=False, history=False)
    with dg.DagsterInstance.ephemeral() as instance:
        job = defs.resolve_job_def(INPUTS_JOB)
        assert job.execute_in_process(instance=instance, partition_key=DAY).success
        assert len(loads) == 1
        small_suite.edit_case("customer_count", sql="SELECT COUNT(*) AS n FROM customers")
        assert job.execute_in_process(instance=instance, partition_key=DAY).success
        assert len(loads) == 2  # the edited suite, once

"""Fixtures of the pipeline tests: a small suite with its scripted servers, and an instance."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

# The scripted OpenAI and agent servers of the agents' tests, for the pipeline stages run here.
from eval_pipeline_tests.agents.conftest import agent_server, openai_server  # noqa: F401
from eval_pipeline_tests.pipeline.small_suite import (
    MODELS,
    SmallSuite,
    open_small_suite,
    seed_history_manifest,
)


@pytest.fixture
def small_suite(tmp_path: Path, history_dbt_target: Path) -> Iterator[SmallSuite]:
    """A fresh suite folder with its agent and judge servers running. Its state folder starts
    with the session's parse of the packaged history project (`history_dbt_target`), what its
    first `build_definitions` would otherwise parse again for every test."""
    with open_small_suite(tmp_path / "suite") as suite:
        seed_history_manifest(suite, history_dbt_target)
        yield suite


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An in-memory instance with the two models' partitions. It keeps every event for as long
    as it lives, so data versions and staleness carry across materializations (and it is
    several times faster than a SQLite one)."""
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        yield instance

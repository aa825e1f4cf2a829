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


@pytest.fixture(scope="session")
def history_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged history dbt project's manifest, parsed once per session: it names no
    suite, and each fresh suite's definitions would otherwise run `dbt parse` for it (many
    seconds of CPU), as a user's do only once."""
    from eval_pipeline.defs.assets.history import PROJECT_DIR
    from eval_pipeline.defs.assets.warehouse import prepare_dbt_project

    target = tmp_path_factory.mktemp("history_dbt") / "target"
    return prepare_dbt_project(PROJECT_DIR, target_path=target).manifest_path


@pytest.fixture
def small_suite(tmp_path: Path, history_manifest: Path) -> Iterator[SmallSuite]:
    """A fresh suite folder with its agent and judge servers running, the history project's
    manifest in its state folder as after a first load (`prepare_dbt_project` parses none)."""
    with open_small_suite(tmp_path / "suite") as suite:
        seed_history_manifest(suite, history_manifest)
        yield suite


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An in-memory instance with the two models' partitions. It keeps every event for as long
    as it lives, so data versions and staleness carry across materializations (and it is
    several times faster than a SQLite one)."""
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        yield instance

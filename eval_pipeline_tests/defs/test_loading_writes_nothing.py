"""Loading a suite's definitions writes nothing into the suite folder: dbt's parse and the cached asset keys go to the user's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.defs import build_definitions, suite_definitions
from eval_pipeline_tests.conftest import copy_sample_suite

pytestmark = pytest.mark.slow  # parses the sample suite's dbt project


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder below `folder`, with its size and mtime."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
    }


def test_loading_a_fresh_suite_writes_nothing_into_its_folder(tmp_path: Path, dbt_parse_cache):
    suite = copy_sample_suite(tmp_path / "suite")
    before = snapshot(suite)

    build_definitions(suite)  # the UI's: both dbt projects parsed (neither has a manifest)
    build_definitions(suite, dbt=False)  # the CLI's: the warehouse's asset keys cached
    suite_definitions(suite, name="sales")

    assert snapshot(suite) == before
    assert any(dbt_parse_cache.rglob("manifest.json")), "the parse went nowhere"

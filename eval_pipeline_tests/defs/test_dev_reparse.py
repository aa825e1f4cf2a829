"""Under `dagster dev` a dbt project is parsed again only when it changed.

Every process `dagster dev` starts loads the definitions, each UI-launched run's worker
included; re-parsing both dbt projects there cost each run tens of seconds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from eval_pipeline.defs.assets.history import PROJECT_DIR
from eval_pipeline.defs.assets.warehouse import prepare_dbt_project

pytestmark = pytest.mark.slow  # runs `dbt parse`


def test_an_unchanged_project_is_not_parsed_again_and_an_edited_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project_dir = Path(shutil.copytree(PROJECT_DIR, tmp_path / "history_dbt"))
    manifest = prepare_dbt_project(project_dir).manifest_path
    parsed = manifest.stat().st_mtime_ns

    monkeypatch.setenv("DAGSTER_IS_DEV_CLI", "1")  # what `dagster dev` sets for its processes
    prepare_dbt_project(project_dir)
    assert manifest.stat().st_mtime_ns == parsed, "an unchanged project was parsed again"

    model = next((project_dir / "models").rglob("*.sql"))
    later = parsed / 1e9 + 5
    os.utime(model, (later, later))
    prepare_dbt_project(project_dir)
    assert manifest.stat().st_mtime_ns > parsed, "an edited project was not parsed again"

"""Where an evaluation's Dagster instance lives, known without importing Dagster."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from eval_pipeline.store import StateFolder
from eval_pipeline.suite import SuiteConfig

DAGSTER_HOME_ENV = "DAGSTER_HOME"


def instance_home(config: SuiteConfig, *, create: bool = True) -> Path:
    """`$DAGSTER_HOME` when set, else `<suite>/.eval/dagster_home`, created with a `dagster.yaml`.

    Keeping the instance beside the results means a suite copied elsewhere keeps its run
    history with it, and `eval-pipeline ui` opens the instance `eval-pipeline test` wrote to.
    `create=False` only names it, for a reader that must leave no trace when it finds none.
    """
    configured = os.environ.get(DAGSTER_HOME_ENV)
    home = Path(configured).resolve() if configured else StateFolder(config.state_path).dagster_home
    if not create:
        return home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        target.write_text(default_instance_yaml(), encoding="utf-8")
    return home


def default_instance_yaml() -> str:
    """The instance settings shipped with the package (`eval_pipeline/dagster.yaml`, the one copy)."""
    return resources.files("eval_pipeline").joinpath("dagster.yaml").read_text(encoding="utf-8")

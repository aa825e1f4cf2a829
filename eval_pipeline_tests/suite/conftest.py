"""Helpers to lay out small suites in a temporary folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def make_suite(tmp_path: Path):
    """Write `{relative path: YAML text}` under `<tmp>/suite/cases/` and return the suite root."""

    def make(files: dict[str, str], config: str | None = None) -> Path:
        root = tmp_path / "suite"
        (root / "cases").mkdir(parents=True, exist_ok=True)
        for relative, text in files.items():
            path = root / "cases" / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        if config is not None:
            (root / "eval_config.yaml").write_text(textwrap.dedent(config), encoding="utf-8")
        return root

    return make

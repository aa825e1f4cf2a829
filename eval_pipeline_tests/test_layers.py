"""The layer contracts of pyproject.toml hold, and every package sits in one layer."""

from __future__ import annotations

import tomllib
from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"


def _contract(contract_type: str) -> dict:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["type"] == contract_type)


def test_the_import_contracts_hold():
    # What `.ci/run` runs as `lint-imports`; here too, so the inner loop sees a broken layer.
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0


def test_every_package_sits_in_a_layer():
    # A package left out of the layers contract is checked by nothing: adding one means
    # deciding where it sits.
    packages = {
        f"eval_pipeline.{init.parent.name}"
        for init in (REPO / "eval_pipeline").glob("*/__init__.py")
    }
    layered = {
        name.strip()
        for layer in _contract("layers")["layers"]
        for name in layer.replace(":", "|").split("|")
    }
    assert packages == layered

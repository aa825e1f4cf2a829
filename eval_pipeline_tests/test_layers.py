"""The layer contracts of pyproject.toml hold, and every package sits in one layer."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"


def _contract(contract_type: str) -> dict:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["type"] == contract_type)


@pytest.mark.slow
def test_the_import_contracts_hold():
    # What `.ci/run` runs as `lint-imports`; here too, so the inner loop sees a broken layer.
    # In a process of its own: import-linter reconfigures logging, which silenced the warnings
    # of every logger created before it in the test process.
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


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


def test_the_readme_layout_names_every_package_and_folder():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    named = {line.split()[0].split("/")[0] for line in layout.splitlines() if line.strip()}
    build_output = {"build", "dist", "venv"}  # git-ignored, as are *.egg-info
    folders = {
        path.name
        for path in [*(REPO / "eval_pipeline").iterdir(), *REPO.iterdir()]
        if path.is_dir()
        and not path.name.startswith((".", "_"))
        and path.name not in build_output
        and not path.name.endswith(".egg-info")
        and any(path.iterdir())
    }
    assert folders - named == set()


def test_a_package_uses_another_only_through_its_public_surface():
    # The underscore means "inside this package": what another package needs is exported from
    # that package's __init__, so a module can change its private layout without breaking others.
    reaching_in = []
    for path in sorted((REPO / "eval_pipeline").rglob("*.py")):
        own = path.relative_to(REPO / "eval_pipeline").parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if (
                    parts[0] == "eval_pipeline"
                    and len(parts) > 2
                    and parts[1] != own
                    and parts[2].startswith("_")
                ):
                    reaching_in.append(f"{path.relative_to(REPO)}:{node.lineno} {node.module}")
    assert reaching_in == []

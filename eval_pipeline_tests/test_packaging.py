"""What pip installs: every import declared, typed, one version, nothing built into the package."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import eval_pipeline

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "eval_pipeline"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _imported_top_level_modules() -> set[str]:
    modules = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"eval_pipeline"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_declared_dependency():
    # A feature's extra (`s3`, `postgres`) counts: its modules are imported where it is used.
    extras = [
        spec
        for name, specs in PYPROJECT["project"]["optional-dependencies"].items()
        if name != "dev"
        for spec in specs
    ]
    declared = {
        _normalise(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0])
        for spec in [*PYPROJECT["project"]["dependencies"], *extras]
    }
    providers = metadata.packages_distributions()
    undeclared = {
        module: providers.get(module, ["?"])
        for module in _imported_top_level_modules()
        if not declared & {_normalise(d) for d in providers.get(module, [module])}
    }
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


def test_dependencies_whose_internals_the_code_relies_on_have_an_upper_bound():
    specs = {
        _normalise(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]): spec
        for spec in PYPROJECT["project"]["dependencies"]
    }
    for name in ("duckdb", "sqlglot", "dagster", "dagster-dbt", "dbt-core", "pydantic"):
        assert "<" in specs[name], specs[name]


def test_the_package_is_typed_and_ships_no_build_output():
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]["eval_pipeline"]
    assert (PACKAGE / "py.typed").is_file() and "py.typed" in package_data
    assert not any("target" in pattern for pattern in package_data)


def test_one_version_and_one_instance_configuration():
    assert eval_pipeline.__version__ == PYPROJECT["project"]["version"]
    assert not (REPO / "dagster.yaml").exists()  # the package's copy is the one source
    assert (PACKAGE / "dagster.yaml").is_file()


def test_every_document_the_code_cites_is_in_the_repository():
    """A citation points a reader at something they can open: no internal design brief (which
    the repository lacks), and every `docs/….md` named in the code or the docs exists."""
    folders = (
        "eval_pipeline",
        "eval_pipeline_tests",
        "benchmarks",
        "docs",
        "deploy",
        "tests_suite",
    )
    texts = [REPO / "README.md", REPO / "pyproject.toml"] + [
        path
        for folder in folders
        for path in (REPO / folder).rglob("*")
        if path.suffix in {".py", ".md", ".yaml", ".yml", ".toml"} and path.is_file()
    ]
    brief = "DES" + "IGN"  # spelled apart, so this test does not find itself
    citing, missing = [], []
    for path in texts:
        text = path.read_text(encoding="utf-8", errors="replace")
        if re.search(rf"\b{brief}\b", text):
            citing.append(str(path.relative_to(REPO)))
        missing += [
            f"{path.relative_to(REPO)}: {cited}"
            for cited in re.findall(r"\bdocs/[\w./-]+\.md\b", text)
            if not (REPO / cited).is_file()
        ]
    assert not citing, f"cite a design brief the repository lacks: {citing}"
    assert not missing, f"cite documents that do not exist: {missing}"

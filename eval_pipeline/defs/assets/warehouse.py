"""The warehouse the agent queries, built by the suite's dbt project into its DuckDB file."""

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets
from dagster_dbt.dbt_project import using_dagster_dev

from eval_pipeline.defs import groups
from eval_pipeline.defs.dbt_target import parse_target, project_cache_dir
from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.store import file_lock
from eval_pipeline.suite import WarehouseConfig

PROJECT_SUFFIXES = {".sql", ".yml", ".yaml", ".py", ".csv", ".md", ".jinja"}
POOL = "duckdb_warehouse"  # one dbt build at a time may hold the warehouse file
RESOURCE_KEY = "dbt"


class WarehouseTranslator(DagsterDbtTranslator):
    """Keys dbt models under `warehouse/` so they never clash with the pipeline's own assets
    (and under the suite's name before that, `sales/warehouse/orders`, beside other suites)."""

    def __init__(self, names: SuiteNames = UNNAMED) -> None:
        super().__init__()
        self.names = names

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        key = super().get_asset_key(dbt_resource_props).with_prefix(groups.WAREHOUSE)
        return self.names.prefixed(key)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return self.names.group(groups.WAREHOUSE)


def prepare_dbt_project(
    project_dir: Path, *, target_path: Path | None = None, dbt_vars: str | None = None
) -> DbtProject:
    """The dbt project with its manifest, parsing it first when no manifest exists yet
    (a fresh clone, a test's copy), so definitions load without a separate step.

    The manifest read is the newer of the project's own (in `target_path`, absolute, default
    its `target/`: a `dbt parse` the user ran, a copy a test made) and our parse's, which
    goes to the user's cache (`dbt_target.parse_target`): loading writes nothing into the
    suite folder nor the installed package. `dbt_vars`: the `--vars` its builds pass, parsed
    with them, so the first build parses only what changed (with other vars dbt parses
    everything again).
    """
    project = DbtProject(
        project_dir=project_dir,
        profiles_dir=project_dir,
        target_path=parse_target(project_dir, target_path),
    )
    # Under `dagster dev` every process that loads the definitions (the code server, and each
    # run's worker) used to re-parse: seconds per UI-launched run. Only an edited project is.
    if not _outdated(project.manifest_path, project_dir):
        return project
    target = project_cache_dir(project_dir) / "target"
    project = DbtProject(project_dir=project_dir, profiles_dir=project_dir, target_path=target)
    target.mkdir(parents=True, exist_ok=True)
    # Several processes may load the definitions at once (parallel steps, tests): one parses.
    with file_lock(target / ".parse.lock"):
        if _outdated(project.manifest_path, project_dir):
            resource = DbtCliResource(project_dir=project, dbt_executable=dbt_executable())
            flags = ["--vars", dbt_vars] if dbt_vars is not None else []
            resource.cli(["parse", "--quiet", *flags], target_path=project.target_path).wait()
    return project


def _outdated(manifest: Path, project_dir: Path) -> bool:
    """No manifest yet, or (under `dagster dev`, where edits are expected) a project file
    newer than it."""
    if not manifest.exists():
        return True
    if not using_dagster_dev():
        return False
    parsed = manifest.stat().st_mtime
    skip = {"target", "logs", "dbt_packages"}
    for path in project_dir.rglob("*"):
        relative = path.relative_to(project_dir).parts
        if relative[0] in skip or path.suffix not in PROJECT_SUFFIXES:
            continue
        if path.stat().st_mtime > parsed:
            return True
    return False


def dbt_vars(warehouse: WarehouseConfig) -> str:
    """The `--vars` that point the dbt profile at the configured warehouse file."""
    return json.dumps({"warehouse_path": str(warehouse.path)})


def build_warehouse_assets(
    warehouse: WarehouseConfig, names: SuiteNames = UNNAMED
) -> tuple[dg.AssetsDefinition, DbtCliResource]:
    """The dbt models of the suite's warehouse as Dagster assets, and the resource that runs
    them (under the key `names.resource("dbt")`)."""
    resource_key = names.resource(RESOURCE_KEY)
    assert warehouse.dbt_project is not None
    project = prepare_dbt_project(warehouse.dbt_project, dbt_vars=dbt_vars(warehouse))

    @dbt_assets(
        manifest=project.manifest_path,
        project=project,
        dagster_dbt_translator=WarehouseTranslator(names),
        name=names.scoped("warehouse_dbt_models"),
        pool=POOL,
        required_resource_keys={resource_key},
    )
    def warehouse_dbt_models(context: dg.AssetExecutionContext):
        dbt: DbtCliResource = getattr(context.resources, resource_key)
        yield from dbt.cli(["build", "--vars", dbt_vars(warehouse)], context=context).stream()

    return warehouse_dbt_models, DbtCliResource(
        project_dir=project, dbt_executable=dbt_executable()
    )


def dbt_executable() -> str:
    """`dbt` from PATH, else the one installed beside this Python (a venv not on PATH)."""
    beside = Path(sys.executable).with_name("dbt")
    return shutil.which("dbt") or (str(beside) if beside.exists() else "dbt")

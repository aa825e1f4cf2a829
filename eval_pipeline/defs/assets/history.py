"""History marts: a dbt project over the results (pass-rate trend, flaky cases, regressions)."""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, dbt_assets

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.warehouse import dbt_executable, prepare_dbt_project
from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.store import StateFolder, publish_results

POOL = "duckdb_history"  # one build at a time writes history.duckdb
PROJECT_DIR = Path(__file__).resolve().parents[2] / "history_dbt"
RESOURCE_KEY = "history_dbt"


class HistoryTranslator(DagsterDbtTranslator):
    """Marts are keyed `history/<model>` in group `history`; the dbt sources keep the keys
    their `meta.dagster.asset_key` gives (`grades`, `model_summaries`), so the marts hang
    below the evaluation assets in the lineage graph (both under the suite's name, if any)."""

    def __init__(self, names: SuiteNames = UNNAMED) -> None:
        super().__init__()
        self.names = names

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        key = super().get_asset_key(dbt_resource_props)
        if dbt_resource_props["resource_type"] != "source":
            key = key.with_prefix(groups.HISTORY)
        return self.names.prefixed(key)

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return self.names.group(groups.HISTORY)


def history_vars(layout: StateFolder) -> str:
    """The `--vars` pointing the profile at this suite's results and history files (a bucket
    store's too: results.duckdb holds copies of its tables, read with no S3 access)."""
    values: dict[str, Any] = {
        "results_path": str(layout.database),
        "history_path": str(layout.history_database),
    }
    return json.dumps(values)


def build_history_assets(
    layout: StateFolder, names: SuiteNames = UNNAMED
) -> tuple[dg.AssetsDefinition, DbtCliResource]:
    """The history marts as Dagster assets, and the dbt resource that builds them (under the
    key `names.resource("history_dbt")`).

    The project ships in the package and is parsed once, into the user's cache (a manifest
    in the state folder's `history_dbt_target`, if one is there and newer, is read instead):
    neither the installed package nor the suite folder is written to at load. Each run writes
    its artefacts and logs to the suite's state folder, and its tables to `history.duckdb`.
    """
    resource_key = names.resource(RESOURCE_KEY)
    project = prepare_dbt_project(
        PROJECT_DIR, target_path=layout.history_dbt_target, dbt_vars=history_vars(layout)
    )

    @dbt_assets(
        manifest=project.manifest_path,
        project=project,
        dagster_dbt_translator=HistoryTranslator(names),
        name=names.scoped("history_marts"),
        pool=POOL,
        required_resource_keys={resource_key, names.resource(SUITE_KEY)},
    )
    def history_marts(context: dg.AssetExecutionContext):
        history_dbt: DbtCliResource = getattr(context.resources, resource_key)
        layout = suite_of(context, names).store()
        publish_results(layout)  # the marts read results.duckdb: as of now, not the last evaluation
        yield from history_dbt.cli(
            ["build", "--vars", history_vars(layout)],
            context=context,
            target_path=layout.history_dbt_dir,
        ).stream()

    return history_marts, DbtCliResource(project_dir=project, dbt_executable=dbt_executable())

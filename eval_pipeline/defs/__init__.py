"""The Dagster layer: thin assets over the plain functions of the other packages, wired in one place."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.assets.evaluation import build_evaluation_assets
from eval_pipeline.defs.assets.history import build_history_assets
from eval_pipeline.defs.assets.suite import agent_context, judge, test_cases
from eval_pipeline.defs.assets.variants import build_variants_asset
from eval_pipeline.defs.assets.warehouse import build_warehouse_assets
from eval_pipeline.defs.automation import build_automation
from eval_pipeline.defs.compaction import compact_store_job, compact_store_schedule
from eval_pipeline.defs.partitions import model_day_partitions
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.store import StoreLayout
from eval_pipeline.suite import find_suite_root, load_config

SUITE_ENV = "EVAL_SUITE_DIR"
WAREHOUSE_JOB = "build_warehouse"
EVALUATE_JOB = "evaluate_model_day"


def default_suite_root() -> Path:
    """`$EVAL_SUITE_DIR`, else the suite found from the current folder (see `find_suite_root`)."""
    configured = os.environ.get(SUITE_ENV)
    return Path(configured).resolve() if configured else find_suite_root()


def build_definitions(suite_root: Path) -> dg.Definitions:
    """Every asset, check, job, schedule and sensor for one suite folder."""
    config = load_config(suite_root)
    resources: dict[str, object] = {"suite": SuiteResource(root=str(config.root))}
    assets: list[dg.AssetsDefinition] = [test_cases, agent_context, judge]
    jobs: list = []
    warehouse_keys: list[dg.AssetKey] = []
    if config.warehouse is not None and config.warehouse.dbt_project is not None:
        warehouse_assets, dbt = build_warehouse_assets(config.warehouse)
        assets.append(warehouse_assets)
        resources["dbt"] = dbt
        warehouse_keys = list(warehouse_assets.keys)
        jobs.append(
            dg.define_asset_job(
                WAREHOUSE_JOB,
                selection=dg.AssetSelection.assets(warehouse_assets),
                description="Build the suite's warehouse with its dbt project.",
            )
        )
    variants = build_variants_asset(warehouse_keys)
    evaluation = build_evaluation_assets(warehouse_keys, variants)
    assets += [variants, *evaluation.all]
    history_marts, history_dbt = build_history_assets(StoreLayout.of(config))
    assets.append(history_marts)
    resources["history_dbt"] = history_dbt
    jobs.append(
        dg.define_asset_job(
            EVALUATE_JOB,
            selection=dg.AssetSelection.assets(*evaluation.per_model_day),
            partitions_def=model_day_partitions,
            description="Run, grade and summarize one model on one day.",
        )
    )
    schedules, sensors = build_automation(
        str(config.root),
        config.test.schedule,
        suite_assets=[test_cases, agent_context, judge],
        agent_runs=evaluation.agent_runs,
    )
    jobs.append(compact_store_job)
    schedules.append(compact_store_schedule)
    return dg.Definitions(
        assets=assets, resources=resources, jobs=jobs, schedules=schedules, sensors=sensors
    )


def materialize(
    defs: dg.Definitions,
    assets: list[str],
    *,
    instance: dg.DagsterInstance,
    partition_key: str | dg.MultiPartitionKey | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize some of the definitions' assets in this process, recorded in `instance`
    (so the runs show in the Dagster UI of that instance)."""
    keys = [dg.AssetKey.from_user_string(name) for name in assets]
    job = defs.resolve_implicit_job_def_def_for_assets(keys)
    assert job is not None, f"no job can materialize {assets}"
    return job.execute_in_process(
        instance=instance,
        partition_key=partition_key,
        asset_selection=keys,
        run_config=run_config,
        tags=tags,
        raise_on_error=False,
    )

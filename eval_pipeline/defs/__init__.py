"""The Dagster layer: thin assets over the plain functions of the other packages, wired in one place."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.evaluation import build_evaluation_assets
from eval_pipeline.defs.assets.suite import build_suite_assets
from eval_pipeline.defs.assets.usage import build_usage_assets, usage_partitions
from eval_pipeline.defs.assets.variants import build_variants_asset
from eval_pipeline.defs.assets.warehouse_reads import models_read
from eval_pipeline.defs.automation import build_automation
from eval_pipeline.defs.compaction import build_compaction
from eval_pipeline.defs.dbt_keys import warehouse_asset_keys
from eval_pipeline.defs.launched import LAUNCHED_BY_TAG, UI, build_tag_run_launcher
from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.defs.partitions import day_partitions, history_start
from eval_pipeline.defs.resources import SUITE_KEY, SuiteResource
from eval_pipeline.defs.settings import build_settings_sources, with_settings_deps
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import (
    JOB_NAMES,
    JobKind,
    load_suite_once,
    remember_suite,
    stages_of,
)
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, SuiteError, find_suite_root, load_config

if TYPE_CHECKING:
    from eval_pipeline.defs.chain import Job

SUITE_ENV = "EVAL_SUITE_DIR"
WAREHOUSE_JOB = "build_warehouse"
# The stages a user recognises, one named job each: the CLI runs these, and so can the UI.
SUITE_JOB = "read_suite"
INPUTS_JOB, EVALUATE_JOB, REPORT_JOB = (JOB_NAMES[kind] for kind in ("inputs", "model", "report"))
HISTORY_JOB = "build_history"
SUITE_ASSETS = ("test_cases", "agent_context", "grading_rules")
EVALUATE_ASSETS = ("agent_runs", "grades", "model_summaries")
REPORT_ASSETS = ("leaderboard", "report")


def default_suite_root() -> Path:
    """`$EVAL_SUITE_DIR`, else the suite found from the current folder (see `find_suite_root`)."""
    configured = os.environ.get(SUITE_ENV)
    return Path(configured).resolve() if configured else find_suite_root()


def suite_definitions(
    suite_dir: str | os.PathLike[str], *, name: str | None = None, owners: Sequence[str] = ()
) -> dg.Definitions:
    """One suite's assets, checks, jobs, schedules and sensors, to merge into a Dagster
    project of your own (`dg.Definitions.merge`, or `EvalSuiteComponent` in a defs folder).

    Args:
        suite_dir: the suite folder (its `eval_config.yaml`).
        name: prefixes everything the suite defines, so several suites and your own assets
            live in one code location: asset keys (`sales/agent_runs`, its dbt models
            `sales/warehouse/orders`), groups (`sales_evaluation`), jobs, schedules and
            sensors (`sales__evaluate_model_day`), resource keys (`sales_suite`,
            `sales_dbt`) and the models partitions (`sales_models`). Without one the names
            are the bare ones `eval-pipeline ui` shows, for a project holding one suite.
        owners: the owners of every asset the suite defines, as Dagster spells them
            (`team:analytics`, `ana@example.com`), shown in the catalog and its filters.
    """
    return build_definitions(Path(suite_dir).resolve(), names=SuiteNames(name), owners=owners)


def _stage_job(name: str, assets, description: str) -> Job:
    # The partitions come from the assets (all of a stage share theirs); a run launched from
    # the UI's launchpad says so unless the launcher tags it otherwise (cli, schedule).
    selection = (
        assets if isinstance(assets, dg.AssetSelection) else dg.AssetSelection.assets(*assets)
    )
    return dg.define_asset_job(
        name,
        selection=selection,
        description=description,
        run_tags={LAUNCHED_BY_TAG: UI},
    )


def build_definitions(
    suite_root: Path,
    *,
    dbt: bool = True,
    history: bool = True,
    from_day: date | None = None,
    suite: Suite | None = None,
    names: SuiteNames = UNNAMED,
    owners: Sequence[str] = (),
) -> dg.Definitions:
    """Every asset, check, job, schedule and sensor for one suite folder; its daily
    partitions start where its history does (`history_start`, read from the store), or at
    `from_day` when given: the graph of a recorder, which records that day's stages while
    the command still writes the store, so it must not read it.

    `dbt=False` (an evaluation from the command line) leaves out what only building with
    dbt needs, the warehouse's dbt assets and the history marts, so dagster_dbt is never
    imported: the evaluation assets still depend on the warehouse models, by their keys
    (cached in the user's cache, `dbt_keys`), and the UI's code location keeps everything.
    `history=False` (a command that builds the warehouse, never the marts) leaves out the
    history marts alone, so the packaged history project is not parsed for it.
    `suite` (an evaluation from the command line, in this process) is the suite its runs
    read, as loaded and checked; each fails once the files no longer hash to it.
    `names` (`suite_definitions(name=…)`) prefix every key and name; the CLI's are bare.
    `owners` own every asset (none by default).
    """
    config = load_config(suite_root)
    digest = remember_suite(suite) if suite is not None else None
    resources: dict[str, object] = {
        names.resource(SUITE_KEY): SuiteResource(root=str(config.root), files_digest=digest)
    }
    graph = StageGraph(day_partitions(from_day or history_start(config), names), names)
    inputs = build_suite_assets(graph)
    suite_assets = inputs.all
    assets: list[dg.AssetsDefinition] = [*inputs.sources, *suite_assets]
    jobs: list = []
    warehouse_keys: list[dg.AssetKey] = []
    if config.warehouse is not None and config.warehouse.dbt_project is not None:
        if dbt:
            from eval_pipeline.defs.assets.warehouse import RESOURCE_KEY, build_warehouse_assets

            warehouse_assets, warehouse_dbt = build_warehouse_assets(config.warehouse, names)
            assets.append(warehouse_assets)
            resources[names.resource(RESOURCE_KEY)] = warehouse_dbt
            models = {
                key: set(warehouse_assets.asset_deps.get(key, set()))
                for key in warehouse_assets.keys
            }
            jobs.append(
                _stage_job(
                    names.scoped(WAREHOUSE_JOB),
                    [warehouse_assets],
                    "Build the suite's warehouse with its dbt project.",
                )
            )
        else:
            models = {
                names.prefixed(key): {names.prefixed(parent) for parent in parents}
                for key, parents in warehouse_asset_keys(config.warehouse).items()
            }
        warehouse_keys = _models_read(suite_root, models)
    variants = build_variants_asset(graph, warehouse_keys)
    evaluation = build_evaluation_assets(graph, warehouse_keys)
    assets += [variants, *evaluation.all]
    if dbt and history:
        from eval_pipeline.defs.assets.history import RESOURCE_KEY as HISTORY_KEY
        from eval_pipeline.defs.assets.history import build_history_assets

        history_marts, history_dbt = build_history_assets(StateFolder.of(config), names)
        assets.append(history_marts)
        resources[names.resource(HISTORY_KEY)] = history_dbt

    # The pipeline's three jobs, as the stage graph declares them (the command's stages
    # run the same ones, `pipeline.run_stages`).
    def pipeline_job(kind: JobKind, description: str) -> Job:
        keys = [names.key(declared.asset) for declared in stages_of(kind)]
        return _stage_job(
            names.scoped(JOB_NAMES[kind]), dg.AssetSelection.assets(*keys), description
        )

    inputs_job = pipeline_job(
        "inputs",
        "Read the suite, run every test's reference SQL for one day and build the "
        "warehouse variants of the semantic checks (reused when built).",
    )
    evaluate_job = pipeline_job("model", "Run, grade and summarize one model on one day.")
    report_job = pipeline_job("report", "Rank the day's models and write the day's report.")
    suite_job = _stage_job(
        names.scoped(SUITE_JOB),
        suite_assets,
        "Read the test files, the agent context and the grading rules.",
    )
    # Named, as every job the UI lists: a schedule or sensor given a bare asset selection
    # gets an anonymous job (`__anonymous_asset_job_…`) nobody can find or launch by name.
    history_job = _stage_job(
        names.scoped(HISTORY_JOB),
        dg.AssetSelection.groups(names.group(groups.HISTORY)),
        "Rebuild the history marts (trend, flaky cases, regressions) over every stored day.",
    )
    jobs += [suite_job, inputs_job, evaluate_job, report_job, history_job]
    schedules, sensors = build_automation(
        str(config.root),
        config.test.schedule,
        inputs=inputs,
        suite_job=suite_job,
        inputs_job=inputs_job,
        evaluate_job=evaluate_job,
        report_job=report_job,
        history_job=history_job,
        own_assets=dg.AssetSelection.assets(*assets),
        names=names,
    )
    compaction, compaction_schedule = build_compaction(names)
    jobs.append(compaction)
    schedules.append(compaction_schedule)
    if from_day is None:  # a recorder records the evaluation's stages, never usage
        usage = build_usage_assets(
            names, usage_partitions(config), inputs.test_cases.key, config.usage.schedule
        )
        assets += usage.assets
        jobs.append(usage.job)
        schedules.append(usage.schedule)
    sensors.append(
        build_tag_run_launcher(
            names.scoped("tag_run_launcher"),
            jobs=[job.name for job in jobs],
            assets=[key for definition in assets for key in definition.keys],
        )
    )
    settings = build_settings_sources(names)
    assets = [
        *settings.all,
        *with_settings_deps(
            assets,
            settings,
            grading_rules=inputs.grading_rules.key,
            agent_runs=evaluation.agent_runs.key,
        ),
    ]
    if owners:
        assets = dg.map_asset_specs(
            lambda spec: spec.replace_attributes(owners=[*spec.owners, *owners]), assets
        )
    return dg.Definitions(
        assets=assets,
        resources=resources,
        jobs=jobs,
        schedules=schedules,
        sensors=sensors,
        # A run's steps in its run worker, one after another: the default executor starts a
        # process per step, each loading these definitions again (seconds each, more than the
        # steps themselves take); runs of other partitions still run at once.
        executor=dg.in_process_executor,
    )


def _models_read(
    suite_root: Path, models: dict[dg.AssetKey, set[dg.AssetKey]]
) -> list[dg.AssetKey]:
    """The dbt models the evaluation depends on: those its reference SQL reads (the marts
    while a test file is broken: the definitions still load, the CLI names the problem)."""
    try:  # once per process: a command line evaluation handed its suite in (`remember_suite`)
        suite = load_suite_once(suite_root)
    except SuiteError:
        suite = None
    return models_read(suite, models.keys(), models)

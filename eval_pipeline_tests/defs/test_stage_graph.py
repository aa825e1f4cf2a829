"""The Dagster assets and jobs are the stage graph the pipeline declares, and the command runs it.

`pipeline.STAGES` says, once, what each stage reads, how it is partitioned and which job runs
it; the definitions of a suite (the sample suite, with its dbt warehouse, and one under a
name) must show exactly that, and the command's record must hold each job's stages in the
declared order. A stage added to the declaration without its asset (or the reverse), a
dependency added to an asset and not declared, a stage moved to another job: each fails here.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs import build_definitions
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.record import EVALUATION_TAG
from eval_pipeline.pipeline import JOB_NAMES, STAGES, stages_of
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, FIRST_MODELS_ARGS, write_suite
from eval_pipeline_tests.conftest import copy_sample_suite

PARTITIONS = {
    "none": type(None),
    "day": dg.DailyPartitionsDefinition,
    "model_day": dg.MultiPartitionsDefinition,
}


def _definitions(root: Path, name: str | None) -> dg.Definitions:
    return build_definitions(root, dbt=False, history=False, names=SuiteNames(name))


@pytest.mark.slow  # the sample suite's dbt project is parsed
@pytest.mark.parametrize("name", [None, "sales"])
def test_the_assets_and_jobs_are_the_declared_stage_graph(tmp_path: Path, name: str | None):
    root = copy_sample_suite(tmp_path / "suite")
    names = SuiteNames(name)
    defs = _definitions(root, name)
    graph = defs.resolve_asset_graph()
    declared = {stage.asset for stage in STAGES}
    for stage in STAGES:
        node = graph.get(names.key(stage.asset))
        reads = {
            key
            for key in node.parent_keys
            if key in {names.key(asset) for asset in declared}  # sources, dbt models aside
        }
        assert reads == {names.key(asset) for asset in stage.reads}, stage.asset
        assert isinstance(node.partitions_def, PARTITIONS[stage.partitioning]), stage.asset
    for kind, job_name in JOB_NAMES.items():
        job = defs.resolve_job_def(names.scoped(job_name))
        selected = set(job.asset_layer.executable_asset_keys)
        assert selected == {names.key(stage.asset) for stage in stages_of(kind)}, job_name
    # Every stage after the stages it reads.
    order = [stage.asset for stage in STAGES]
    for stage in STAGES:
        assert all(order.index(read) < order.index(stage.asset) for read in stage.reads)


@pytest.mark.slow  # an evaluation through the command
def test_the_command_runs_each_job_s_stages_in_the_declared_order(tmp_path: Path):
    """As recorded in the suite's instance: each of the command's job runs materialized its
    job's declared stages, in the declared order."""
    root = write_suite(tmp_path / "suite")
    result = run_cli("test", "--date", DAY, *FIRST_MODELS_ARGS, cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    by_run: dict[str, list[tuple[int, str]]] = {}
    with dg.DagsterInstance.from_config(str(root / ".eval" / "dagster_home")) as instance:
        for stage in STAGES:
            for record in instance.fetch_materializations(
                dg.AssetKey(stage.asset), limit=100
            ).records:
                run = record.asset_materialization.tags[EVALUATION_TAG]
                by_run.setdefault(run, []).append((record.storage_id, stage.asset))
    log = root / ".eval" / "logs" / "eval-pipeline-record.log"
    assert by_run, log.read_text() if log.exists() else "no record log"
    runs = [[asset for _, asset in sorted(assets)] for assets in by_run.values()]
    expected = {kind: [stage.asset for stage in stages_of(kind)] for kind in JOB_NAMES}
    assert sorted(runs) == sorted(
        [expected["inputs"], expected["model"], expected["model"], expected["report"]]
    )

"""The stage graph, declared once: each stage's asset, the stages it reads, its partitioning and the job that runs it; the command's in-process path and the Dagster assets and jobs are both built from it.

A stage is the work of one asset (`stages.py`). The pipeline's three jobs run them in this
order: the day's inputs (`day_inputs`), one model's partition of the day
(`evaluate_model_day`, one run per model), the day's report (`day_report`). `run_stages`
runs the same jobs in this process, in the same order; the Dagster layer names its jobs,
selects their assets, and gives each stage asset its partitions and its dependencies on the
other stages from here (`defs/stage_graph.py`), so neither restates the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["JOB_NAMES", "STAGES", "JobKind", "Partitioning", "Stage", "stage", "stages_of"]

#: The pipeline's jobs, by what they do: the day's inputs, one model's partition of the
#: day, the day's report.
JobKind = Literal["inputs", "model", "report"]

#: Of no partition (the suite's files, read whatever the day), daily, or model × day.
Partitioning = Literal["none", "day", "model_day"]

#: The name of each job, as the Dagster UI lists it and a run's record carries it.
JOB_NAMES: dict[JobKind, str] = {
    "inputs": "day_inputs",
    "model": "evaluate_model_day",
    "report": "day_report",
}


@dataclass(frozen=True)
class Stage:
    """One stage: the asset it materializes, the job that runs it, its partitioning and
    the stages it reads (besides the suite's observed files, the warehouse and the store)."""

    asset: str
    job: JobKind
    partitioning: Partitioning
    reads: tuple[str, ...] = ()


#: Every stage, in the order the jobs run them (a stage after the stages it reads). The
#: suite's observed sources (test files, context files, eval_config.yaml's settings) and the
#: warehouse's models are read too; they are no stages.
STAGES: tuple[Stage, ...] = (
    Stage("test_cases", "inputs", "none"),
    Stage("agent_context", "inputs", "none"),
    Stage("grading_rules", "inputs", "none"),
    Stage("reference_results", "inputs", "day", reads=("test_cases",)),
    Stage("warehouse_variants", "inputs", "none", reads=("test_cases",)),
    Stage("agent_runs", "model", "model_day", reads=("test_cases", "agent_context")),
    Stage(
        "grades",
        "model",
        "model_day",
        reads=(
            "test_cases",
            "grading_rules",
            "reference_results",
            "warehouse_variants",
            "agent_runs",
        ),
    ),
    Stage("model_summaries", "model", "model_day", reads=("grades",)),
    Stage("leaderboard", "report", "day", reads=("model_summaries",)),
    Stage("report", "report", "day", reads=("leaderboard",)),
)


def stage(asset: str) -> Stage:
    """The stage of `asset`."""
    for declared in STAGES:
        if declared.asset == asset:
            return declared
    raise KeyError(f"no stage materializes {asset!r}")


def stages_of(job: JobKind) -> tuple[Stage, ...]:
    """The stages `job` runs, in order."""
    return tuple(declared for declared in STAGES if declared.job == job)

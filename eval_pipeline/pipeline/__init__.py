"""The pipeline's stages as plain functions: runs, references, grades and summaries of a partition."""

from eval_pipeline.pipeline._budget import BudgetSpent, round_size
from eval_pipeline.pipeline._budget_outcome import BudgetOutcome
from eval_pipeline.pipeline._budget_store import stored_budget
from eval_pipeline.pipeline._comparisons import detectable_difference
from eval_pipeline.pipeline._dagster_home import (
    DAGSTER_HOME_ENV,
    default_instance_yaml,
    instance_home,
    queued_unserved,
)
from eval_pipeline.pipeline._direct import (
    StageFailed,
    pending_records,
    run_stages,
    stage_key,
)
from eval_pipeline.pipeline._document import (
    ModelComparison,
    ModelEntry,
    PassAggregate,
    PassMetrics,
    ResultDetails,
    ResultEntry,
    ResultsDocument,
    Summary,
    TestPassMetrics,
    Threshold,
)
from eval_pipeline.pipeline._evaluate import (
    Evaluation,
    NothingGraded,
    evaluate,
)
from eval_pipeline.pipeline._evaluation import (
    EvaluationRequest,
    EvaluationResult,
    Runner,
    today,
)
from eval_pipeline.pipeline._gates import (
    CAUSES,
    AccuracyGate,
    PartitionChecks,
    RunChanges,
    check_partition,
    diff_days,
    first_evaluated_day,
    regressions_sql,
    since_previous_day,
)
from eval_pipeline.pipeline._grades import grade_partition, grade_runs, judge_model
from eval_pipeline.pipeline._graph import JOB_NAMES, STAGES, JobKind, Stage, stage, stages_of
from eval_pipeline.pipeline._import_results import ImportReport, import_results
from eval_pipeline.pipeline._imported_runs import ResultsFileError, read_results_file
from eval_pipeline.pipeline._loaded_suite import (
    SuiteChanged,
    load_suite_once,
    remember_suite,
    suite_files_digest,
)
from eval_pipeline.pipeline._model_processes import dismiss_workers
from eval_pipeline.pipeline._new_suite import URL_VARIABLE, NewSuite, start_suite
from eval_pipeline.pipeline._recorder import RECORDERS, Recorder
from eval_pipeline.pipeline._references import (
    EXPECTED_EMPTY_TAG,
    REFERENCE_LIMITS,
    references_by_database,
)
from eval_pipeline.pipeline._report import write_report
from eval_pipeline.pipeline._results import (
    build_results,
    decode_run_rows,
    nao_verdict,
    read_run_rows,
    run_rows_parameters,
    run_rows_sql,
    stored_results,
    ungraded_rows,
    write_results_file,
)
from eval_pipeline.pipeline._results_files import (
    BY_RULES,
    CHANGES,
    REGRESSION,
    PairChange,
    compare_results,
    count_changes,
    latest_results_files,
    results_entries,
    summarize_results,
)
from eval_pipeline.pipeline._rows import run_from_row
from eval_pipeline.pipeline._runs import (
    PartitionRuns,
    attempts_for,
    run_agents,
    run_partition,
)
from eval_pipeline.pipeline._session import EvaluationSession, Orchestrator
from eval_pipeline.pipeline._summaries import (
    PartitionSummary,
    summarize_grades,
    summarize_partition,
)
from eval_pipeline.pipeline._unchanged import (
    LastEvaluation,
    partition_unchanged,
)
from eval_pipeline.pipeline._usage_summaries import current_recommendations

__all__ = [
    "BY_RULES",
    "CAUSES",
    "CHANGES",
    "DAGSTER_HOME_ENV",
    "EXPECTED_EMPTY_TAG",
    "JOB_NAMES",
    "RECORDERS",
    "REFERENCE_LIMITS",
    "REGRESSION",
    "STAGES",
    "URL_VARIABLE",
    "AccuracyGate",
    "BudgetOutcome",
    "BudgetSpent",
    "Evaluation",
    "EvaluationRequest",
    "EvaluationResult",
    "EvaluationSession",
    "ImportReport",
    "JobKind",
    "LastEvaluation",
    "ModelComparison",
    "ModelEntry",
    "NewSuite",
    "NothingGraded",
    "Orchestrator",
    "PairChange",
    "PartitionChecks",
    "PartitionRuns",
    "PartitionSummary",
    "PassAggregate",
    "PassMetrics",
    "Recorder",
    "ResultDetails",
    "ResultEntry",
    "ResultsDocument",
    "ResultsFileError",
    "RunChanges",
    "Runner",
    "Stage",
    "StageFailed",
    "SuiteChanged",
    "Summary",
    "TestPassMetrics",
    "Threshold",
    "attempts_for",
    "build_results",
    "check_partition",
    "compare_results",
    "count_changes",
    "current_recommendations",
    "decode_run_rows",
    "default_instance_yaml",
    "detectable_difference",
    "diff_days",
    "dismiss_workers",
    "evaluate",
    "first_evaluated_day",
    "grade_partition",
    "grade_runs",
    "import_results",
    "instance_home",
    "judge_model",
    "latest_results_files",
    "load_suite_once",
    "nao_verdict",
    "partition_unchanged",
    "pending_records",
    "queued_unserved",
    "read_results_file",
    "read_run_rows",
    "references_by_database",
    "regressions_sql",
    "remember_suite",
    "results_entries",
    "round_size",
    "run_agents",
    "run_from_row",
    "run_partition",
    "run_rows_parameters",
    "run_rows_sql",
    "run_stages",
    "since_previous_day",
    "stage",
    "stage_key",
    "stages_of",
    "start_suite",
    "stored_budget",
    "stored_results",
    "suite_files_digest",
    "summarize_grades",
    "summarize_partition",
    "summarize_results",
    "today",
    "ungraded_rows",
    "write_report",
    "write_results_file",
]

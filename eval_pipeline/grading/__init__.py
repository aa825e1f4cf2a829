"""Grading: results compared as data, checks and judges, pass@k, semantic checks, failure kinds."""

from eval_pipeline.grading._agreement import Agreement, agreement
from eval_pipeline.grading._assertions import check_assertions
from eval_pipeline.grading._compare import Comparison, compare_results
from eval_pipeline.grading._extraction import Extraction, extract_answer
from eval_pipeline.grading._failure_kind import FailureKind, FailureReason, classify_failure
from eval_pipeline.grading._grader import Grade, Grader
from eval_pipeline.grading._judges import DEFAULT_CONSISTENCY_PROMPT, Judge
from eval_pipeline.grading._metrics import (
    CaseMetrics,
    ModelSummary,
    RunOutcome,
    case_metrics,
    pass_at_k,
    rank_models,
    summarize_models,
)
from eval_pipeline.grading._ordering import sql_is_ordered
from eval_pipeline.grading._reference import ReferenceResult, run_references
from eval_pipeline.grading._reference_health import ReferenceWarning, reference_health
from eval_pipeline.grading._reply_checks import check_consistency, check_evaluators
from eval_pipeline.grading._semantic import SemanticCheck, semantic_check
from eval_pipeline.grading._tool_calls import JudgeDecision, check_tool_calls
from eval_pipeline.grading._variants import VariantOptions, WarehouseVariants, build_variants
from eval_pipeline.grading._verdict import CheckResult, GradeStatus

__all__ = [
    "DEFAULT_CONSISTENCY_PROMPT",
    "Agreement",
    "CaseMetrics",
    "CheckResult",
    "Comparison",
    "Extraction",
    "FailureKind",
    "FailureReason",
    "Grade",
    "GradeStatus",
    "Grader",
    "Judge",
    "JudgeDecision",
    "ModelSummary",
    "ReferenceResult",
    "ReferenceWarning",
    "RunOutcome",
    "SemanticCheck",
    "VariantOptions",
    "WarehouseVariants",
    "agreement",
    "build_variants",
    "case_metrics",
    "check_assertions",
    "check_consistency",
    "check_evaluators",
    "check_tool_calls",
    "classify_failure",
    "compare_results",
    "extract_answer",
    "pass_at_k",
    "rank_models",
    "reference_health",
    "run_references",
    "semantic_check",
    "sql_is_ordered",
    "summarize_models",
]

"""Grading: results compared as data, assertions, tool-call tests, LLM judges and pass@k metrics."""

from eval_pipeline.grading._agreement import Agreement, agreement
from eval_pipeline.grading._assertions import check_assertions
from eval_pipeline.grading._compare import Comparison, compare_results
from eval_pipeline.grading._extraction import Extraction, extract_answer
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
from eval_pipeline.grading._reply_checks import check_consistency, check_evaluators
from eval_pipeline.grading._tool_calls import JudgeDecision, check_tool_calls
from eval_pipeline.grading._verdict import CheckResult, GradeStatus

__all__ = [
    "DEFAULT_CONSISTENCY_PROMPT",
    "Agreement",
    "CaseMetrics",
    "CheckResult",
    "Comparison",
    "Extraction",
    "Grade",
    "GradeStatus",
    "Grader",
    "Judge",
    "JudgeDecision",
    "ModelSummary",
    "ReferenceResult",
    "RunOutcome",
    "agreement",
    "case_metrics",
    "check_assertions",
    "check_consistency",
    "check_evaluators",
    "check_tool_calls",
    "compare_results",
    "extract_answer",
    "pass_at_k",
    "rank_models",
    "run_references",
    "sql_is_ordered",
    "summarize_models",
]

"""Grading: results compared as data, checks and judges, pass@k, semantic checks, failure kinds."""

from eval_pipeline.grading._agreement import (
    Agreement,
    JudgeNoise,
    agreement,
    judge_noise,
    with_judge_samples,
)
from eval_pipeline.grading._assertions import check_assertions, is_subset, strict_equal
from eval_pipeline.grading._check import Check, CheckContext, checks, declared_checks, runs_needed
from eval_pipeline.grading._compare import Comparison, compare_results
from eval_pipeline.grading._extraction import Extraction, extract_answer
from eval_pipeline.grading._failure_kind import FailureKind, classify_failure
from eval_pipeline.grading._grader import Grade, Grader
from eval_pipeline.grading._judges import DEFAULT_CONSISTENCY_PROMPT, PROMPTS_VERSION, Judge
from eval_pipeline.grading._metrics import (
    CaseMetrics,
    ModelSummary,
    RunOutcome,
    case_metrics,
    pass_at_k,
    summarize_models,
)
from eval_pipeline.grading._pass_rate_sequence import PassRateSequence, pass_rate_sequence
from eval_pipeline.grading._reference import ReferenceResult, frame_from_rows, run_references
from eval_pipeline.grading._reference_health import drift_warning, reference_health
from eval_pipeline.grading._reply_checks import check_consistency, check_evaluators
from eval_pipeline.grading._rules import GRADING_CODE_VERSION, GradingRules, grading_code
from eval_pipeline.grading._semantic import semantic_check
from eval_pipeline.grading._sequential import (
    Allocation,
    BudgetDecision,
    BudgetQuestion,
    Question,
    SequentialComparison,
    decide,
    default_question,
    next_round,
    sequential_comparison,
)
from eval_pipeline.grading._stability import any_may_vary_within_day, may_vary_within_day
from eval_pipeline.grading._statistics import (
    PairedComparison,
    attempts_by_model,
    compare_models,
    day_comparisons,
    detectable_difference_sentence,
    holm_adjust,
    judge_self_agreement,
    mcnemar_exact_p,
    minimum_detectable_difference,
    pass_rate_interval,
    sign_flip_p,
    wilson_interval,
)
from eval_pipeline.grading._tool_calls import JudgeDecision, check_tool_calls
from eval_pipeline.grading._variants import (
    MANIFEST,
    VariantOptions,
    WarehouseVariants,
    build_variants,
    load_variants,
)
from eval_pipeline.grading._verdict import CheckResult, GradeStatus, combine, grade_retried
from eval_pipeline.grading._warehouse_keys import read_schema
from eval_pipeline.suite import register_check, unregister_check

__all__ = [
    "DEFAULT_CONSISTENCY_PROMPT",
    "GRADING_CODE_VERSION",
    "MANIFEST",
    "PROMPTS_VERSION",
    "Agreement",
    "Allocation",
    "BudgetDecision",
    "BudgetQuestion",
    "CaseMetrics",
    "Check",
    "CheckContext",
    "CheckResult",
    "Comparison",
    "Extraction",
    "FailureKind",
    "Grade",
    "GradeStatus",
    "Grader",
    "GradingRules",
    "Judge",
    "JudgeDecision",
    "JudgeNoise",
    "ModelSummary",
    "PairedComparison",
    "PassRateSequence",
    "Question",
    "ReferenceResult",
    "RunOutcome",
    "SequentialComparison",
    "VariantOptions",
    "WarehouseVariants",
    "agreement",
    "any_may_vary_within_day",
    "attempts_by_model",
    "build_variants",
    "case_metrics",
    "check_assertions",
    "check_consistency",
    "check_evaluators",
    "check_tool_calls",
    "checks",
    "classify_failure",
    "combine",
    "compare_models",
    "compare_results",
    "day_comparisons",
    "decide",
    "declared_checks",
    "default_question",
    "detectable_difference_sentence",
    "drift_warning",
    "extract_answer",
    "frame_from_rows",
    "grade_retried",
    "grading_code",
    "holm_adjust",
    "is_subset",
    "judge_noise",
    "judge_self_agreement",
    "load_variants",
    "may_vary_within_day",
    "mcnemar_exact_p",
    "minimum_detectable_difference",
    "next_round",
    "pass_at_k",
    "pass_rate_interval",
    "pass_rate_sequence",
    "read_schema",
    "reference_health",
    "register_check",
    "run_references",
    "runs_needed",
    "semantic_check",
    "sequential_comparison",
    "sign_flip_p",
    "strict_equal",
    "summarize_models",
    "unregister_check",
    "wilson_interval",
    "with_judge_samples",
]

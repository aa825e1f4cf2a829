"""Test files → validated cases: the YAML format, discovery, selection, configuration, CSV import."""

from eval_pipeline.suite._case import (
    ArgumentMatcher,
    Case,
    CheckKind,
    Consistency,
    Evaluator,
    ExpectedToolCall,
    Message,
    Semantic,
    Tolerance,
    ToolCallAssertion,
)
from eval_pipeline.suite._config import (
    CONFIG_FILE,
    AgentConfig,
    MissingSecret,
    ModelConfig,
    ModelCosts,
    ProviderConfig,
    SuiteConfig,
    Templated,
    TestDefaults,
    ThresholdMode,
    WarehouseConfig,
    load_config,
)
from eval_pipeline.suite._context import AgentContext, ContextFile, load_agent_context
from eval_pipeline.suite._csv_import import import_csv
from eval_pipeline.suite._databases import DatabaseConfig
from eval_pipeline.suite._errors import (
    Problem,
    SelectionError,
    SuiteError,
    describe_error,
    first_line,
)
from eval_pipeline.suite._limits import Limits
from eval_pipeline.suite._nao import (
    NAO_CONFIG_FILE,
    is_nao_project,
    load_nao_config,
    to_model_id,
)
from eval_pipeline.suite._parse import MAX_ATTEMPTS, MAX_CONSISTENCY_RUNS
from eval_pipeline.suite._suite import (
    CASES_DIR,
    Suite,
    discover_case_files,
    find_suite_root,
    load_cases,
    load_suite,
)

__all__ = [
    "CASES_DIR",
    "CONFIG_FILE",
    "MAX_ATTEMPTS",
    "MAX_CONSISTENCY_RUNS",
    "NAO_CONFIG_FILE",
    "AgentConfig",
    "AgentContext",
    "ArgumentMatcher",
    "Case",
    "CheckKind",
    "Consistency",
    "ContextFile",
    "DatabaseConfig",
    "Evaluator",
    "ExpectedToolCall",
    "Limits",
    "Message",
    "MissingSecret",
    "ModelConfig",
    "ModelCosts",
    "Problem",
    "ProviderConfig",
    "SelectionError",
    "Semantic",
    "Suite",
    "SuiteConfig",
    "SuiteError",
    "Templated",
    "TestDefaults",
    "ThresholdMode",
    "Tolerance",
    "ToolCallAssertion",
    "WarehouseConfig",
    "describe_error",
    "discover_case_files",
    "find_suite_root",
    "first_line",
    "import_csv",
    "is_nao_project",
    "load_agent_context",
    "load_cases",
    "load_config",
    "load_nao_config",
    "load_suite",
    "to_model_id",
]

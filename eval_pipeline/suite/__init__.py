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
    recording_name_problem,
)
from eval_pipeline.suite._context import (
    AgentContext,
    ContextFile,
    dbt_doc_files,
    load_agent_context,
)
from eval_pipeline.suite._csv_import import import_csv
from eval_pipeline.suite._databases import DEFAULT_DATABASE_NAME, DatabaseConfig
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
from eval_pipeline.suite._secrets import (
    MIN_PIECE,
    PUBLIC_HEADERS,
    REDACTED,
    Redactor,
    redact,
    redact_value,
)
from eval_pipeline.suite._store_config import StoreConfig
from eval_pipeline.suite._suite import (
    CASES_DIR,
    Suite,
    discover_case_files,
    find_suite_root,
    load_cases,
    load_suite,
)
from eval_pipeline.suite._yaml import load_yaml

__all__ = [
    "CASES_DIR",
    "CONFIG_FILE",
    "DEFAULT_DATABASE_NAME",
    "MAX_ATTEMPTS",
    "MAX_CONSISTENCY_RUNS",
    "MIN_PIECE",
    "NAO_CONFIG_FILE",
    "PUBLIC_HEADERS",
    "REDACTED",
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
    "Redactor",
    "SelectionError",
    "Semantic",
    "StoreConfig",
    "Suite",
    "SuiteConfig",
    "SuiteError",
    "Templated",
    "TestDefaults",
    "ThresholdMode",
    "Tolerance",
    "ToolCallAssertion",
    "WarehouseConfig",
    "dbt_doc_files",
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
    "load_yaml",
    "recording_name_problem",
    "redact",
    "redact_value",
    "to_model_id",
]

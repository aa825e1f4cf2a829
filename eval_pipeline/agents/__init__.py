"""Who answers a test: LLM providers, the built-in SQL agent, external HTTP agents, record/replay."""

from eval_pipeline.agents._builtin import AgentLimits, BuiltinAgent, LimitExceeded
from eval_pipeline.agents._cache import (
    CachedChatModel,
    CompletionCache,
    MemoryCache,
    complete_usable,
)
from eval_pipeline.agents._catalog import WarehouseCatalog
from eval_pipeline.agents._chat import Agent, ChatModel
from eval_pipeline.agents._errors import (
    AgentError,
    AuthenticationFailed,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RequestRejected,
    UnknownModel,
)
from eval_pipeline.agents._factory import AgentFactory
from eval_pipeline.agents._http_agent import HttpAgent
from eval_pipeline.agents._identity import (
    BUILTIN_AGENT_VERSION,
    answerer_identity,
    endpoint_settings,
)
from eval_pipeline.agents._model_ids import (
    RECORDINGS_DIR,
    model_id_problem,
    recording_path,
    require_model_id,
    require_models,
    require_secrets,
    split_model_id,
)
from eval_pipeline.agents._nao_backend import NAO_PREFIX, NaoBackendAgent, nao_model
from eval_pipeline.agents._nao_backend import PASSWORD_VARIABLE as NAO_PASSWORD_VARIABLE
from eval_pipeline.agents._nao_backend import USERNAME_VARIABLE as NAO_USERNAME_VARIABLE
from eval_pipeline.agents._pricing import PRICE_TABLE_DATE, cost_usd, costs_for
from eval_pipeline.agents._providers import ProviderPool
from eval_pipeline.agents._replay import (
    Recorder,
    Recording,
    RecordingChatModel,
    RekeyReport,
    ReplayChatModel,
    ReplayMissing,
    call_context,
    recording_name,
    relabel,
)
from eval_pipeline.agents._retry import DEFAULT_RETRY_POLICY, RetryPolicy, send_with_retry
from eval_pipeline.agents._runner import RunRequest, execute_run, execute_runs
from eval_pipeline.agents._types import (
    AgentRun,
    ChatMessage,
    Completion,
    QueryRecord,
    RequestedToolCall,
    RunStatus,
    ToolCallRecord,
    ToolSpec,
    Usage,
    run_key,
)
from eval_pipeline.agents._wire import MAX_COUNT

__all__ = [
    "BUILTIN_AGENT_VERSION",
    "DEFAULT_RETRY_POLICY",
    "MAX_COUNT",
    "NAO_PASSWORD_VARIABLE",
    "NAO_PREFIX",
    "NAO_USERNAME_VARIABLE",
    "PRICE_TABLE_DATE",
    "RECORDINGS_DIR",
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentLimits",
    "AgentRun",
    "AuthenticationFailed",
    "BuiltinAgent",
    "CachedChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "CompletionCache",
    "HttpAgent",
    "LimitExceeded",
    "MemoryCache",
    "NaoBackendAgent",
    "ProtocolError",
    "ProviderError",
    "ProviderPool",
    "ProviderTimeout",
    "ProviderUnavailable",
    "QueryRecord",
    "RateLimited",
    "Recorder",
    "Recording",
    "RecordingChatModel",
    "RekeyReport",
    "ReplayChatModel",
    "ReplayMissing",
    "RequestRejected",
    "RequestedToolCall",
    "RetryPolicy",
    "RunRequest",
    "RunStatus",
    "ToolCallRecord",
    "ToolSpec",
    "UnknownModel",
    "Usage",
    "WarehouseCatalog",
    "answerer_identity",
    "call_context",
    "complete_usable",
    "cost_usd",
    "costs_for",
    "endpoint_settings",
    "execute_run",
    "execute_runs",
    "model_id_problem",
    "nao_model",
    "recording_name",
    "recording_path",
    "relabel",
    "require_model_id",
    "require_models",
    "require_secrets",
    "run_key",
    "send_with_retry",
    "split_model_id",
]

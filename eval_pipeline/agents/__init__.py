"""Who answers a test: LLM providers, the built-in SQL agent, external HTTP agents, record/replay."""

from eval_pipeline.agents._anthropic import AnthropicChatModel, anthropic_messages
from eval_pipeline.agents._builtin import BUILTIN_TOOLS, AgentLimits
from eval_pipeline.agents._cache import (
    CachedChatModel,
    MemoryCache,
    completion_key,
    completion_to_dict,
)
from eval_pipeline.agents._chat import Agent, ChatModel
from eval_pipeline.agents._errors import (
    AgentError,
    AuthenticationFailed,
    ProtocolError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RequestRejected,
    UnknownModel,
    redact_url,
    scrub,
)
from eval_pipeline.agents._factory import AgentFactory
from eval_pipeline.agents._identity import answerer_identity, endpoint_settings
from eval_pipeline.agents._kinds import (
    AGENTS_GROUP,
    AgentKind,
    agent_kind,
    register_agent_kind,
    unregister_agent_kind,
)
from eval_pipeline.agents._model_ids import (
    model_id_problem,
    require_models,
    require_secrets,
    split_model_id,
)
from eval_pipeline.agents._nao_backend import NAO_PREFIX, NaoBackendAgent, nao_model
from eval_pipeline.agents._nao_backend import PASSWORD_VARIABLE as NAO_PASSWORD_VARIABLE
from eval_pipeline.agents._nao_backend import USERNAME_VARIABLE as NAO_USERNAME_VARIABLE
from eval_pipeline.agents._openai import OpenAIChatModel, openai_messages
from eval_pipeline.agents._pricing import PRICE_TABLE, cost_usd, costs_for, table_costs
from eval_pipeline.agents._providers import ProviderPool
from eval_pipeline.agents._replay import (
    Recording,
    RekeyReport,
    ReplayChatModel,
    ReplayMissing,
    call_context,
    recording_name,
    relabel,
    request_hash,
)
from eval_pipeline.agents._retry import RetryPolicy, parse_retry_after, send_with_retry
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
    "AGENTS_GROUP",
    "BUILTIN_TOOLS",
    "MAX_COUNT",
    "NAO_PASSWORD_VARIABLE",
    "NAO_PREFIX",
    "NAO_USERNAME_VARIABLE",
    "PRICE_TABLE",
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentKind",
    "AgentLimits",
    "AgentRun",
    "AnthropicChatModel",
    "AuthenticationFailed",
    "CachedChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "MemoryCache",
    "NaoBackendAgent",
    "OpenAIChatModel",
    "ProtocolError",
    "ProviderPool",
    "ProviderTimeout",
    "ProviderUnavailable",
    "QueryRecord",
    "RateLimited",
    "Recording",
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
    "agent_kind",
    "answerer_identity",
    "anthropic_messages",
    "call_context",
    "completion_key",
    "completion_to_dict",
    "cost_usd",
    "costs_for",
    "endpoint_settings",
    "execute_run",
    "execute_runs",
    "model_id_problem",
    "nao_model",
    "openai_messages",
    "parse_retry_after",
    "recording_name",
    "redact_url",
    "register_agent_kind",
    "relabel",
    "request_hash",
    "require_models",
    "require_secrets",
    "run_key",
    "scrub",
    "send_with_retry",
    "split_model_id",
    "table_costs",
    "unregister_agent_kind",
]

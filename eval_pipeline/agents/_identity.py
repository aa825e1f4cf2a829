"""What answers for a model id, as a digest: a change of endpoint, request setting or agent is another answerer."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from eval_pipeline.agents._builtin import (
    CLARIFICATION,
    DESCRIBE_TABLE,
    LIST_TABLES,
    SYSTEM_PROMPT,
    TEST_MODE_NOTE,
    AgentLimits,
    execute_sql_tool,
)
from eval_pipeline.agents._model_ids import split_model_id
from eval_pipeline.agents._nao_backend import NAO_PREFIX, nao_backend_url
from eval_pipeline.agents._replay import recording_name
from eval_pipeline.suite import SuiteConfig

__all__ = ["BUILTIN_AGENT_VERSION", "answerer_identity", "endpoint_settings"]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: The built-in agent's own part of every answer: its prompt, its tools and its bounds. A new
#: prompt or tool is another agent, so its runs are made again.
BUILTIN_AGENT_VERSION = _digest(
    [
        SYSTEM_PROMPT,
        TEST_MODE_NOTE,
        [asdict(tool) for tool in (LIST_TABLES, DESCRIBE_TABLE, CLARIFICATION)],
        asdict(execute_sql_tool("{engine}")),
        asdict(AgentLimits()),
    ]
)


def endpoint_settings(config: SuiteConfig, model: str) -> dict[str, Any]:
    """The settings of the requests made for a `provider:model_id` or `replay:` id: which
    server is asked (provider, protocol, base URL) and with what (`max_tokens`, the model's
    request `settings`), or which recording answers. Empty for an id the suite does not
    configure.

    Timeouts and prices are left out: they change how long a run may take or what it costs,
    not what the model answers.
    """
    name = recording_name(model)
    if name is not None:
        # By its name, as a model is: a recording answers each request with the line recorded
        # for it, and gains lines as tests are added or re-keyed (its whole content would
        # re-run every test whenever one test's answer is recorded).
        return {"recording": name}
    try:
        provider_name, model_id = split_model_id(model)
    except Exception:
        return {}
    provider = config.provider(provider_name)
    if provider is None:
        return {}
    endpoint = {
        "provider": provider.name,
        "protocol": provider.protocol,
        "base_url": provider.base_url,
        "max_tokens": provider.max_tokens_for(model_id),
    }
    # Only when there are any, so the runs of models without settings keep their keys.
    settings = provider.settings_for(model_id)
    return {**endpoint, "settings": settings} if settings else endpoint


def answerer_identity(config: SuiteConfig, model: str) -> str:
    """A digest of what answers a test for `model`, its name aside (the run key has it).

    An external agent (`http:<name>`) is its URL, or the `version` it declares (so moving it
    to another URL keeps its runs). Any other id is the built-in agent over an LLM or a
    recording: the endpoint settings (`endpoint_settings`), the agent's prompt, tools and
    bounds (`BUILTIN_AGENT_VERSION`), and how much of a query result the model is shown.
    nao's agent (`nao:<provider>:<model_id>`) is the backend it runs on.
    """
    prefix, _, name = model.partition(":")
    if prefix == NAO_PREFIX:
        return _digest({"nao_backend": nao_backend_url(config)})
    if prefix == "http":
        agent = config.agent(name)
        if agent is None:
            return _digest({"agent": name})
        return _digest({"agent_version": agent.version} if agent.version else {"url": agent.url})
    return _digest(
        {
            "endpoint": endpoint_settings(config, model),
            "agent": BUILTIN_AGENT_VERSION,
            "model_result_max_chars": config.limits.model_result_max_chars,
        }
    )

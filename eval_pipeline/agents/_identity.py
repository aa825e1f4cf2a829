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
from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._kinds import agent_kind
from eval_pipeline.agents._model_ids import split_model_id
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
    """The settings of the requests made for an LLM id (`provider:model_id`, `replay:`):
    which server is asked and with what, or which recording answers (the kind's `endpoint`).
    Empty for an id the suite does not configure or that names no LLM."""
    try:
        split_model_id(model)
    except UnknownModel:
        return {}
    return agent_kind(model).endpoint(config, model)


def answerer_identity(config: SuiteConfig, model: str) -> str:
    """A digest of what answers a test for `model`, its name aside (the run key has it): what
    its agent kind says answers (`AgentKind.identity`). An external agent (`http:<name>`) is
    its URL, or the `version` it declares; the built-in agent over an LLM or a recording is
    the endpoint settings (`endpoint_settings`), the agent's prompt, tools and bounds
    (`BUILTIN_AGENT_VERSION`) and how much of a query result the model is shown; nao's agent
    (`nao:<provider>:<model_id>`) is the backend it runs on.
    """
    return _digest(agent_kind(model).identity(config, model))

"""The built-in agent kinds: a provider's LLM and a recording (both drive the built-in agent), an external HTTP agent, nao's agent."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._factory import recording_name_for
from eval_pipeline.agents._identity import BUILTIN_AGENT_VERSION, endpoint_settings
from eval_pipeline.agents._kinds import PROVIDER_PREFIX, AgentKind
from eval_pipeline.agents._model_ids import (
    RECORDINGS_DIR,
    recording_path,
    recordings,
    split_model_id,
    unset_secrets,
)
from eval_pipeline.agents._nao_backend import (
    NAO_PREFIX,
    PASSWORD_VARIABLE,
    USERNAME_VARIABLE,
    nao_backend_url,
    nao_model,
)
from eval_pipeline.agents._replay import (
    REPLAY_PREFIX,
    Recorder,
    Recording,
    RecordingChatModel,
    ReplayChatModel,
    recording_name,
)
from eval_pipeline.suite import Problem, SuiteConfig, recording_name_problem

if TYPE_CHECKING:
    from eval_pipeline.agents._chat import Agent, ChatModel
    from eval_pipeline.agents._factory import AgentFactory


def _builtin_agent_identity(config: SuiteConfig, model: str) -> dict[str, Any]:
    """The built-in agent over an LLM: the LLM's endpoint settings, the agent's prompt, tools
    and bounds, and how much of a query result the model is shown."""
    return {
        "endpoint": endpoint_settings(config, model),
        "agent": BUILTIN_AGENT_VERSION,
        "model_result_max_chars": config.limits.model_result_max_chars,
    }


class ProviderKind(AgentKind):
    """`provider:model_id`: a model of a provider under `llm.providers` (or openai /
    anthropic from the environment) driving the built-in agent."""

    prefix = PROVIDER_PREFIX
    names = "a provider's LLM"
    is_llm = True

    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        provider = model.partition(":")[0]
        if config.provider(provider) is None:
            return UnknownModel(
                model,
                f"provider {provider!r} is not under llm.providers",
                [p.name for p in config.providers],
            )
        return None

    def build(self, factory: AgentFactory, model: str) -> Agent:
        return factory.builtin_agent(model)

    def chat_model(self, factory: AgentFactory, model: str) -> ChatModel:
        chat = factory.pool.chat_model(model)
        if factory.recording:
            path = recording_path(factory.config, recording_name_for(model))
            chat = RecordingChatModel(chat, Recorder(path))
        return chat

    def identity(self, config: SuiteConfig, model: str) -> Any:
        return _builtin_agent_identity(config, model)

    def endpoint(self, config: SuiteConfig, model: str) -> dict[str, Any]:
        """Which server is asked (provider, protocol, base URL) and with what (`max_tokens`,
        the model's request `settings`). Timeouts and prices are left out: they change how
        long a run may take or what it costs, not what the model answers."""
        provider_name, model_id = split_model_id(model)
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

    def missing_secrets(
        self, config: SuiteConfig, model: str, *, field: str, shown: str
    ) -> list[Problem]:
        settings = config.provider(model.partition(":")[0])
        if settings is None or settings.api_key is None:
            return []
        # An undeclared openai / anthropic has no entry to point at: its `where` says so.
        entry = f"llm.providers[{settings.name}].api_key" if settings.declared else None
        return unset_secrets([(entry, settings.api_key)], field=field, shown=shown)


class ReplayKind(AgentKind):
    """`replay:<name>`: the recording `recordings/<name>.jsonl` answering as the LLM of the
    built-in agent, free and offline."""

    prefix = REPLAY_PREFIX.rstrip(":")
    names = "a recording"
    is_llm = True

    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        if (problem := recording_name_problem(model)) is not None:
            return UnknownModel(model, problem.split(": ", 1)[1], None)
        if recording_path(config, rest).exists():
            return None
        return UnknownModel(
            model,
            f"no recording {RECORDINGS_DIR}/{rest}.jsonl",
            recordings(config),
            listed_as="recordings",
        )

    def build(self, factory: AgentFactory, model: str) -> Agent:
        return factory.builtin_agent(model)

    def chat_model(self, factory: AgentFactory, model: str) -> ChatModel:
        name = recording_name(model)
        assert name is not None  # the kind of `replay:` ids
        recording = Recording(recording_path(factory.config, name), rekey=factory.rekey)
        factory.recordings[model] = recording
        return ReplayChatModel(recording, model)

    def identity(self, config: SuiteConfig, model: str) -> Any:
        return _builtin_agent_identity(config, model)

    def endpoint(self, config: SuiteConfig, model: str) -> dict[str, Any]:
        # By its name, as a model is: a recording answers each request with the line recorded
        # for it, and gains lines as tests are added or re-keyed (its whole content would
        # re-run every test whenever one test's answer is recorded).
        return {"recording": recording_name(model)}


class HttpKind(AgentKind):
    """`http:<name>`: an external agent under `agents`, asked over HTTP (docs/agent-protocol.md)."""

    prefix = "http"
    names = "an external agent"

    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        if config.agent(rest) is None:
            return UnknownModel(
                model, "no such agent under `agents`", [f"http:{a.name}" for a in config.agents]
            )
        return None

    def build(self, factory: AgentFactory, model: str) -> Agent:
        return factory.pool.http_agent(model)

    def identity(self, config: SuiteConfig, model: str) -> Any:
        """Its URL, or the `version` it declares (so moving it to another URL keeps its runs)."""
        name = model.partition(":")[2]
        agent = config.agent(name)
        if agent is None:
            return {"agent": name}
        return {"agent_version": agent.version} if agent.version else {"url": agent.url}

    def missing_secrets(
        self, config: SuiteConfig, model: str, *, field: str, shown: str
    ) -> list[Problem]:
        agent = config.agent(model.partition(":")[2])
        if agent is None:
            return []
        needed = [(f"agents[{agent.name}].headers.{h}", v) for h, v in agent.headers.items()]
        return unset_secrets(needed, field=field, shown=shown)


class NaoKind(AgentKind):
    """`nao:<provider>:<model_id>`: nao's own agent, run on the suite's nao backend."""

    prefix = NAO_PREFIX
    names = "nao's agent"

    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        try:  # the backend knows its providers; the id must only be well formed
            nao_model(model)
        except UnknownModel as error:
            return error
        return None

    def build(self, factory: AgentFactory, model: str) -> Agent:
        return factory.pool.nao_agent(model)

    def identity(self, config: SuiteConfig, model: str) -> Any:
        return {"nao_backend": nao_backend_url(config)}

    def missing_secrets(
        self, config: SuiteConfig, model: str, *, field: str, shown: str
    ) -> list[Problem]:
        return [
            Problem(
                "the environment",
                None,
                f"environment variable {name} is not set; {shown} ({field}) signs in to nao's "
                "backend with it: export it, or pass -u USER --password PASS",
            )
            for name in (USERNAME_VARIABLE, PASSWORD_VARIABLE)
            if not os.environ.get(name)
        ]

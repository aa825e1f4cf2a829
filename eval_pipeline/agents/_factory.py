"""Who answers for a model id: the built-in agent over an LLM or a replay, or an external HTTP agent."""

from __future__ import annotations

import re

from eval_pipeline.agents._builtin import AgentLimits, BuiltinAgent
from eval_pipeline.agents._catalog import WarehouseCatalog
from eval_pipeline.agents._chat import Agent, ChatModel
from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._model_ids import check_model_id, recording_path
from eval_pipeline.agents._providers import ProviderPool
from eval_pipeline.agents._replay import (
    Recorder,
    Recording,
    RecordingChatModel,
    ReplayChatModel,
    recording_name,
)
from eval_pipeline.agents._sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.suite import AgentContext, SuiteConfig


def recording_name_for(model_id: str) -> str:
    """The file a `--record` run of a model writes (replay it as `replay:<name>`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_id).strip("-")


class AgentFactory:
    """Builds, once per model id, what answers for it; shares connections and the warehouse.

    Args:
        config: the suite configuration.
        pool: the open provider pool (HTTP clients).
        context: the agent context (context files) for the built-in agent's system prompt.
        record: when True, every completion of a real LLM is appended to
            `recordings/<model>.jsonl`, which `replay:<model>` serves back later.
        limits: turn and token bounds of the built-in agent.
        sandbox_limits: the SQL sandbox's time limit and caps; None means the suite's
            `limits:` block.
        rekey: replays serve their lines by position and learn the requests they answer
            (see `Recording.save_keys`); only for re-keying a hand-written recording.
    """

    def __init__(
        self,
        config: SuiteConfig,
        pool: ProviderPool,
        *,
        context: AgentContext,
        record: bool = False,
        limits: AgentLimits | None = None,
        sandbox_limits: SandboxLimits | None = None,
        rekey: bool = False,
    ) -> None:
        self.config = config
        self.pool = pool
        self.context = context
        self.record = record
        self.limits = limits
        self.sandbox_limits = sandbox_limits
        self.rekey = rekey
        self.recordings: dict[str, Recording] = {}
        self._agents: dict[str, Agent] = {}
        self._models: dict[str, ChatModel] = {}
        self._sandbox: SqlSandbox | None = None
        self._catalog: WarehouseCatalog | None = None

    def chat_model(self, model_id: str) -> ChatModel:
        """The chat model for a provider model id or a `replay:` recording (also for judges)."""
        if model_id not in self._models:
            check_model_id(self.config, model_id, chat_model=True)
            name = recording_name(model_id)
            if name is not None:
                recording = Recording(recording_path(self.config, name), rekey=self.rekey)
                self.recordings[model_id] = recording
                self._models[model_id] = ReplayChatModel(recording, model_id)
            else:
                model = self.pool.chat_model(model_id)
                if self.record:
                    recorder = Recorder(recording_path(self.config, recording_name_for(model_id)))
                    model = RecordingChatModel(model, recorder)
                self._models[model_id] = model
        return self._models[model_id]

    def agent(self, model_id: str) -> Agent:
        if model_id not in self._agents:
            check_model_id(self.config, model_id)
            if model_id.startswith("http:"):
                self._agents[model_id] = self.pool.http_agent(model_id)
            else:
                sandbox, catalog = self._warehouse()
                self._agents[model_id] = BuiltinAgent(
                    self.chat_model(model_id), sandbox, catalog, self.context, limits=self.limits
                )
        return self._agents[model_id]

    def _warehouse(self) -> tuple[SqlSandbox, WarehouseCatalog]:
        if self._sandbox is None:
            warehouse = self.config.warehouse
            if warehouse is None:
                raise UnknownModel(
                    "built-in agent", "the suite configures no warehouse for it to query", []
                )
            if not warehouse.path.exists():
                raise FileNotFoundError(
                    f"the warehouse {warehouse.path} does not exist yet: build it first "
                    "(`eval-pipeline warehouse`, or materialize the warehouse assets)"
                )
            limits = self.sandbox_limits or SandboxLimits.from_config(self.config.limits)
            self._sandbox = SqlSandbox.for_file(warehouse.path, limits=limits)
            self._catalog = WarehouseCatalog.load(self._sandbox, warehouse.dbt_project)
        assert self._catalog is not None
        return self._sandbox, self._catalog

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

"""Who answers for a model id: built once per id by its agent kind, over the suite's shared connections and warehouses."""

from __future__ import annotations

import re
import threading

from eval_pipeline.agents._builtin import AgentLimits, BuiltinAgent
from eval_pipeline.agents._catalog import WarehouseCatalog
from eval_pipeline.agents._chat import Agent, ChatModel
from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._kinds import agent_kind
from eval_pipeline.agents._model_ids import require_model_id
from eval_pipeline.agents._per_database import PerDatabaseAgent
from eval_pipeline.agents._providers import ProviderPool
from eval_pipeline.agents._replay import Recording
from eval_pipeline.sandbox import SandboxLimits, ServerSandbox, SqlSandbox, open_sandbox
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
        recording: when True, every completion of a real LLM is appended to
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
        recording: bool = False,
        limits: AgentLimits | None = None,
        sandbox_limits: SandboxLimits | None = None,
        rekey: bool = False,
    ) -> None:
        self.config = config
        self.pool = pool
        self.context = context
        self.recording = recording
        self.limits = limits
        self.sandbox_limits = sandbox_limits
        self.rekey = rekey
        self.recordings: dict[str, Recording] = {}
        self._agents: dict[str, Agent] = {}
        self._models: dict[str, ChatModel] = {}
        # database name ("" for a suite without databases) → its sandbox and catalogue
        self._warehouses: dict[str, tuple[SqlSandbox | ServerSandbox, WarehouseCatalog]] = {}
        self._warehouse_lock = threading.Lock()

    def chat_model(self, model_id: str) -> ChatModel:
        """The chat model for an LLM id (`provider:model_id`, `replay:`; also for judges),
        built once by its agent kind."""
        if model_id not in self._models:
            require_model_id(self.config, model_id, chat_model=True)
            self._models[model_id] = agent_kind(model_id).chat_model(self, model_id)
        return self._models[model_id]

    def agent(self, model_id: str) -> Agent:
        """What answers a test for `model_id`, built once by its agent kind (`AgentKind`)."""
        if model_id not in self._agents:
            require_model_id(self.config, model_id)
            self._agents[model_id] = agent_kind(model_id).build(self, model_id)
        return self._agents[model_id]

    def builtin_agent(self, model_id: str) -> Agent:
        """The built-in agent driven by the LLM `model_id`, on each database of the suite."""
        # The first database now, so a missing warehouse shows before any run.
        default = self._builtin_agent(model_id, None)
        if len(self.config.databases) > 1:
            return PerDatabaseAgent(
                model_id, default, lambda name: self._builtin_agent(model_id, name)
            )
        return default

    def _builtin_agent(self, model_id: str, database: str | None) -> BuiltinAgent:
        sandbox, catalog = self._warehouse(database)
        return BuiltinAgent(
            self.chat_model(model_id), sandbox, catalog, self.context, limits=self.limits
        )

    def _warehouse(
        self, name: str | None = None
    ) -> tuple[SqlSandbox | ServerSandbox, WarehouseCatalog]:
        """The sandbox and catalogue of a database (None: the first), opened once and shared."""
        with self._warehouse_lock:  # agents of several models open a database once
            return self._open_warehouse(name)

    def _open_warehouse(
        self, name: str | None
    ) -> tuple[SqlSandbox | ServerSandbox, WarehouseCatalog]:
        database = self.config.database(name)
        key = database.name if database is not None else ""
        if key in self._warehouses:
            return self._warehouses[key]
        limits = self.sandbox_limits or SandboxLimits.from_config(self.config.limits)
        if database is None or (not database.is_server and database.path is None):
            raise UnknownModel(
                "built-in agent", "the suite configures no warehouse for it to query", []
            )
        if database.path is not None and not database.path.exists():
            raise FileNotFoundError(
                f"the warehouse {database.path} does not exist yet: build it first "
                "(`eval-pipeline warehouse`, or materialize the warehouse assets)"
            )
        sandbox = open_sandbox(database, limits)
        catalog = (
            WarehouseCatalog.load(sandbox, database.dbt_project)
            if isinstance(sandbox, SqlSandbox)
            else WarehouseCatalog.from_server(sandbox, database.dbt_project)
        )
        self._warehouses[key] = (sandbox, catalog)
        return self._warehouses[key]

    def close(self) -> None:
        warehouses, self._warehouses = self._warehouses, {}
        for sandbox, _ in warehouses.values():
            sandbox.close()

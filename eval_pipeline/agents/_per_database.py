"""The built-in agent of one model on a suite with several databases: each case on its own database."""

from __future__ import annotations

import threading
from collections.abc import Callable

from eval_pipeline.agents._builtin import BuiltinAgent
from eval_pipeline.agents._threads import in_daemon_thread
from eval_pipeline.agents._types import AgentRun
from eval_pipeline.sandbox import WarehouseUnavailable
from eval_pipeline.suite import Case
from eval_pipeline.warehouses import ConnectionFailed

__all__ = ["PerDatabaseAgent"]


class PerDatabaseAgent:
    """Sends each case to the built-in agent on the database its `database:` names.

    Args:
        model_id: the model id the runs are recorded under.
        default: the agent on the first configured database (a case without `database:`).
        build: the agent on a named database, built on first use (it opens a connection).
    """

    def __init__(
        self, model_id: str, default: BuiltinAgent, build: Callable[[str], BuiltinAgent]
    ) -> None:
        self.model_id = model_id
        self._default = default
        self._build = build
        self._agents: dict[str, BuiltinAgent] = {}
        self._lock = threading.Lock()

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        agent = self._default
        if case.database is not None:
            agent = await in_daemon_thread(self._agent_on, case.database)
        await agent.run(case, attempt=attempt, run=run)

    def _agent_on(self, name: str) -> BuiltinAgent:
        with self._lock:  # one connection and one catalogue read per database
            if name not in self._agents:
                try:
                    self._agents[name] = self._build(name)
                except ConnectionFailed as error:  # the run is an `error` run, named
                    raise WarehouseUnavailable(error.message) from None
            return self._agents[name]

"""Runs many (case, model, attempt) at once: I/O bound, so asyncio with a bound on runs in flight."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from eval_pipeline.agents._chat import Agent
from eval_pipeline.agents._errors import AgentError
from eval_pipeline.agents._replay import call_context
from eval_pipeline.agents._types import AgentRun, RunStatus, run_key
from eval_pipeline.sandbox import WarehouseUnavailable
from eval_pipeline.suite import Case

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRequest:
    """One run to make: a case, a model, an attempt, for a day, under a context."""

    case: Case
    model: str
    attempt: int
    run_date: date
    context_hash: str
    answerer: str = ""  # `answerer_identity` of the model: a stored run must match it

    @property
    def key(self) -> str:
        return run_key(
            self.case.name,
            self.case.input_hash,
            self.model,
            self.context_hash,
            self.attempt,
            self.run_date,
        )

    def new_run(self) -> AgentRun:
        return AgentRun(
            case_name=self.case.name,
            model=self.model,
            attempt=self.attempt,
            run_date=self.run_date,
            input_hash=self.case.input_hash,
            context_hash=self.context_hash,
            answerer=self.answerer or None,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


async def execute_run(
    request: RunRequest, agent: Agent, *, timeout_s: float | None = None
) -> AgentRun:
    """Make one run; infrastructure failures become an `error` run with the reason, never raise."""
    run = request.new_run()
    run.started_at = _now()
    started = time.perf_counter()
    try:
        with call_context(request.case.name, request.attempt, "agent"):
            await asyncio.wait_for(
                agent.run(request.case, attempt=request.attempt, run=run), timeout_s
            )
    except TimeoutError:
        run.status, run.error = (
            RunStatus.ERROR,
            f"the run did not finish within {timeout_s:g} s (limits.run_timeout_s in "
            "eval_config.yaml); it was stopped",
        )
    except (AgentError, WarehouseUnavailable) as error:
        run.status, run.error = RunStatus.ERROR, str(error)
    except Exception as error:  # a bug must not cost the other runs of the batch
        log.exception("run of %s by %s crashed", request.case.name, request.model)
        run.status, run.error = RunStatus.ERROR, f"internal error ({type(error).__name__}): {error}"
    run.duration_ms = round((time.perf_counter() - started) * 1000, 3)
    run.finished_at = _now()
    return run


async def execute_runs(
    requests: Sequence[RunRequest],
    agent_for: Callable[[str], Agent],
    *,
    concurrency: int,
    on_finished: Callable[[AgentRun], None] | None = None,
    timeout_s: float | None = 900.0,
    kept: Callable[[AgentRun], AgentRun] | None = None,
) -> list[AgentRun]:
    """Make every requested run, at most `concurrency` at a time, in the order given.

    Args:
        requests: the runs to make.
        agent_for: the agent answering for a model id (built once per model by the caller).
        concurrency: runs in flight at once (the `threads` setting).
        on_finished: called with each run as soon as it ends, so it can be persisted then.
        timeout_s: a bound on one whole run, whatever its model calls do.
        kept: what is kept of each run once `on_finished` has it (the run itself by
            default): thousands of runs need not all be held whole until the last ends.

    Returns:
        The runs (as `kept` keeps them), in the order of `requests`.

    Raises:
        Whatever `on_finished` raised (a run that cannot be kept: the store stopped
        answering), once the runs still in flight are stopped.
    """
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(request: RunRequest) -> AgentRun:
        async with gate:
            run = await execute_run(request, agent_for(request.model), timeout_s=timeout_s)
        if on_finished is not None:
            on_finished(run)
        return run if kept is None else kept(run)

    tasks = [asyncio.ensure_future(one(r)) for r in requests]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        # Stopped here, while their agents' connections and sandbox are still open: left
        # running, each would fail against them once the caller closes them, and each
        # finished one would be handed to `on_finished` again.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise

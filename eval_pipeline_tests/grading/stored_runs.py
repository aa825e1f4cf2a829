"""Made-up grading inputs: a case, a run as the grading stage reads it back from the store's
journal, and a judge model on a scripted server."""

from __future__ import annotations

import asyncio
import json
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.agents import AgentRun, CachedChatModel
from eval_pipeline.pipeline import run_from_row
from eval_pipeline.suite import Case, Message
from eval_pipeline_tests.agents.servers import ScriptedServer, open_chat_model


def make_case(name: str = "revenue_by_region", **fields: Any) -> Case:
    return Case(
        name,
        Path(f"{name}.yml"),
        f"{name}.yml",
        (Message("user", "What is the revenue per region?"),),
        **fields,
    )


def stored(run: AgentRun) -> AgentRun:
    """The run as the grading stage reads it back from the store's journal."""
    return run_from_row(json.loads(json.dumps(run.to_dict())))


def make_run(
    *,
    answer_rows: list[list[Any]] | None = None,
    columns: tuple[str, ...] = ("region", "revenue"),
    attempt: int = 0,
    **fields: Any,
) -> AgentRun:
    answer_table = None
    if answer_rows is not None:
        answer_table = {"columns": list(columns), "rows": answer_rows}
    run = AgentRun(
        "revenue_by_region",
        "http:my-agent",
        attempt,
        date(2026, 1, 1),
        "input-hash",
        "context-hash",
        final_text=fields.pop("final_text", "North leads with 250.50."),
        answer=answer_table,
        **fields,
    )
    return stored(run)


def with_judge(server: ScriptedServer, use, *, cache=None):
    """Run `use(model)` with the server's model, cached when `cache` is given."""

    async def go():
        async with open_chat_model(server) as model:
            return await use(CachedChatModel(model, cache) if cache is not None else model)

    return asyncio.run(go())

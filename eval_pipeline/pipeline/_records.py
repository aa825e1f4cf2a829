"""Conversions between the domain objects (runs, grades) and the rows of the store's tables."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from eval_pipeline.agents._types import AgentRun, QueryRecord, RunStatus, ToolCallRecord, Usage


def _load(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def run_to_row(run: AgentRun, *, reused: bool) -> dict[str, Any]:
    data = run.to_dict()
    return {
        "key": data["key"],
        "name": run.case_name,
        "model": run.model,
        "run_date": run.run_date,
        "attempt": run.attempt,
        "input_hash": run.input_hash,
        "context_hash": run.context_hash,
        "status": run.status.value,
        "final_text": run.final_text,
        "messages": data["messages"],
        "tool_calls": data["tool_calls"],
        "queries": data["queries"],
        "answer": run.answer,
        "input_tokens": run.usage.input_tokens,
        "cached_input_tokens": run.usage.cached_input_tokens,
        "output_tokens": run.usage.output_tokens,
        "total_tokens": run.usage.total_tokens,
        "cost_usd": run.cost_usd,
        "duration_ms": run.duration_ms,
        "turns": run.turns,
        "tool_call_count": len(run.tool_calls),
        "error": run.error,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "reused": reused,
    }


def run_from_row(row: dict[str, Any]) -> AgentRun:
    """Rebuild a run from a store row or a journal entry (`AgentRun.to_dict`)."""
    run_date = row["run_date"]
    usage = row.get("usage") or {
        "input_tokens": row.get("input_tokens") or 0,
        "cached_input_tokens": row.get("cached_input_tokens") or 0,
        "output_tokens": row.get("output_tokens") or 0,
    }
    return AgentRun(
        case_name=row.get("case_name") or row["name"],
        model=row["model"],
        attempt=int(row["attempt"]),
        run_date=run_date if isinstance(run_date, date) else date.fromisoformat(run_date),
        input_hash=row["input_hash"],
        context_hash=row["context_hash"],
        status=RunStatus(row["status"]),
        final_text=row.get("final_text") or "",
        messages=_load(row.get("messages")) or [],
        tool_calls=[ToolCallRecord(**c) for c in _load(row.get("tool_calls")) or []],
        queries=[QueryRecord(**q) for q in _load(row.get("queries")) or []],
        answer=_load(row.get("answer")),
        usage=Usage(**usage),
        cost_usd=row.get("cost_usd"),
        duration_ms=row.get("duration_ms") or 0.0,
        turns=row.get("turns") or 0,
        error=row.get("error"),
        started_at=row.get("started_at"),
        finished_at=row.get("finished_at"),
    )


def tool_call_rows(run: AgentRun) -> list[dict[str, Any]]:
    return [
        {
            "run_key": run.key,
            "name": run.case_name,
            "model": run.model,
            "run_date": run.run_date,
            "attempt": run.attempt,
            "call_index": index,
            "tool": call.name,
            "arguments": call.arguments if call.arguments is not None else call.raw_arguments,
            "result": call.result,
            "error": call.error,
            "duration_ms": call.duration_ms,
        }
        for index, call in enumerate(run.tool_calls)
    ]

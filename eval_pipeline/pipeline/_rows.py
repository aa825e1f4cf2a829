"""Conversions between the domain objects (runs, grades) and the rows of the store's tables."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any

from eval_pipeline.agents import MAX_COUNT, AgentRun, QueryRecord, RunStatus, ToolCallRecord, Usage

log = logging.getLogger("eval_pipeline.store")

# Runs imported from a results file are keyed `import:<file hash>:<index>`: they have no inputs
# (test hash, context hash) of ours, so they are history, never a run an evaluation reuses.
IMPORTED_KEY_PREFIX = "import:"


def is_imported(key: object) -> bool:
    """Whether a stored run key (`agent_runs.key`, `grades.run_key`) is an imported run's."""
    return isinstance(key, str) and key.startswith(IMPORTED_KEY_PREFIX)


# A lone UTF-16 surrogate is legal in JSON ("\ud800") but not in UTF-8, so no file can hold it.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(value: Any) -> tuple[Any, int]:
    """`value` with every lone surrogate replaced by U+FFFD, and how many were; `value`
    itself when there were none (the common case, walked without copying)."""
    if isinstance(value, str):
        return (value, 0) if value.isascii() else _LONE_SURROGATE.subn("\ufffd", value)
    if isinstance(value, list):
        copy, replaced = None, 0
        for index, item in enumerate(value):
            clean, count = _encodable(item)
            if count:
                copy = copy if copy is not None else list(value)
                copy[index], replaced = clean, replaced + count
        return (value if copy is None else copy), replaced
    if isinstance(value, dict):
        pairs, replaced = None, 0
        for index, (key, item) in enumerate(value.items()):
            clean_key, in_key = _encodable(key)
            clean, in_item = _encodable(item)
            if in_key or in_item:
                pairs = pairs if pairs is not None else list(value.items())
                pairs[index], replaced = (clean_key, clean), replaced + in_key + in_item
        return (value if pairs is None else dict(pairs)), replaced
    return value, 0


def _unstorable_number(run: AgentRun) -> str | None:
    counts = {
        "usage.input_tokens": run.usage.input_tokens,
        "usage.cached_input_tokens": run.usage.cached_input_tokens,
        "usage.output_tokens": run.usage.output_tokens,
        "total tokens": run.usage.total_tokens,
    }
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
            return f"{name} = {value!r:.40} is not a token count (an integer from 0 to {MAX_COUNT})"
    cost = run.cost_usd
    if cost is not None and not (
        isinstance(cost, int | float) and math.isfinite(cost) and cost >= 0
    ):
        return f"cost_usd = {cost!r:.40} is not an amount (a finite number of at least 0)"
    return None


def make_storable(run: AgentRun) -> AgentRun:
    """Make `run` fit the store and the journal, in place, before either sees it.

    Lone surrogates in any text become U+FFFD, and the run's `error` says so (a completed run
    stays completed). A token count or cost that no column can hold (1e30 tokens, a NaN or
    negative cost) makes the run an `error` run naming the number, with zero usage and no
    cost: a reply we cannot store is never stored as an answer.
    """
    replaced = 0
    for target in (run, *run.tool_calls, *run.queries):
        for field in dataclasses.fields(target):
            value = getattr(target, field.name)
            if isinstance(value, str | list | dict):
                clean, count = _encodable(value)
                if count:
                    setattr(target, field.name, clean)
                    replaced += count
    problem = _unstorable_number(run)
    if problem is not None:
        run.status = RunStatus.ERROR
        run.error = f"the reply cannot be stored: {problem}"
        run.usage, run.cost_usd = Usage(), None
    if not math.isfinite(run.duration_ms):
        run.duration_ms = 0.0
    if replaced:
        note = (
            f"{replaced} invalid character(s) (lone UTF-16 surrogates) in the reply "
            "were replaced by U+FFFD"
        )
        run.error = f"{run.error}; {note}" if run.error else note
    return run


def run_to_row(run: AgentRun, *, reused: bool, database: str | None = None) -> dict[str, Any]:
    """A run as an `agent_runs` row; `database`: the `databases:` entry its test names."""
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
        "database": database,
        "answerer": run.answerer,
        "answerer_details": run.answerer_details,
    }


def journaled_runs(records: Iterable[tuple[Path, int, dict[str, Any]]]) -> list[AgentRun]:
    """The runs of journal records (`JournaledPartition.journaled`); a record that is not a
    run is skipped with a warning naming its file and line, so one bad line never blocks a model."""
    runs = []
    for path, line, record in records:
        try:
            runs.append(run_from_row(record))
        except (KeyError, TypeError, ValueError) as error:
            log.warning("warning: skipped %s line %d, not a run (%s)", path, line, error)
    return runs


def run_from_row(row: dict[str, Any]) -> AgentRun:
    """Rebuild a run from a store row (its JSON columns decoded: `decode_json`) or a journal
    entry (`AgentRun.to_dict`), made storable (`make_storable`): a run journaled by an older
    version is never reused as it was."""
    run_date = row["run_date"]
    usage = row.get("usage") or {
        "input_tokens": row.get("input_tokens") or 0,
        "cached_input_tokens": row.get("cached_input_tokens") or 0,
        "output_tokens": row.get("output_tokens") or 0,
    }
    return make_storable(
        AgentRun(
            case_name=row.get("case_name") or row["name"],
            model=row["model"],
            attempt=int(row["attempt"]),
            run_date=run_date if isinstance(run_date, date) else date.fromisoformat(run_date),
            input_hash=row["input_hash"],
            context_hash=row["context_hash"],
            status=RunStatus(row["status"]),
            final_text=row.get("final_text") or "",
            messages=row.get("messages") or [],
            tool_calls=[ToolCallRecord(**c) for c in row.get("tool_calls") or []],
            queries=[QueryRecord(**q) for q in row.get("queries") or []],
            answer=row.get("answer"),
            usage=Usage(**usage),
            cost_usd=row.get("cost_usd"),
            duration_ms=row.get("duration_ms") or 0.0,
            turns=row.get("turns") or 0,
            error=row.get("error"),
            started_at=row.get("started_at"),
            finished_at=row.get("finished_at"),
            answerer=row.get("answerer"),
            answerer_details=row.get("answerer_details"),
        )
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

"""The `limits:` block of eval_config.yaml: how much time and memory any reply, run or query may take."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from eval_pipeline.suite._parse import FieldReader

__all__ = ["LIMIT_KEYS", "Limits", "read_limits"]

_MEMORY = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|KiB|MB|MiB|GB|GiB|TB|TiB)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Limits:
    """Bounds that hold whatever an agent, a model or a query does (docs/limits.md).

    Args:
        response_max_bytes: the body of one reply of an external agent or an LLM provider,
            counted after decompression; a larger reply is an `error` run, never read whole.
        run_timeout_s: one whole run, every request, retry and query of it included.
        query_timeout_s: one sandboxed query of the built-in agent, fetching included.
        query_memory_limit: DuckDB `memory_limit` of the built-in agent's sandbox.
        query_max_rows: rows of one query kept for grading.
        query_max_bytes: bytes of one query's rows kept for grading (and stored); the rows
            after are dropped and the query is marked cut.
        query_cell_max_bytes: bytes of one stored cell; a longer text is cut, a larger
            list or struct replaced by a note, both marked.
        model_result_max_chars: characters of one query result shown to the model.
        context_max_bytes: bytes of the context files together (`context:`, a nao
            project's RULES.md), which every request of every run carries in the built-in
            agent's system prompt; past it the suite is refused before anything runs.
    """

    response_max_bytes: int = 16_000_000
    run_timeout_s: float = 900.0
    query_timeout_s: float = 30.0
    query_memory_limit: str = "1GB"
    query_max_rows: int = 10_000
    query_max_bytes: int = 8_000_000
    query_cell_max_bytes: int = 65_536
    model_result_max_chars: int = 20_000
    #: About 500,000 tokens at 4 bytes a token: more than all but the largest context windows
    #: (1 M tokens) take, and sent again with each turn.
    context_max_bytes: int = 2_000_000


LIMIT_KEYS = tuple(f.name for f in fields(Limits))
_MINIMUM = {
    "response_max_bytes": 1_024,
    "query_max_bytes": 1_024,
    "query_cell_max_bytes": 64,
    "context_max_bytes": 1_024,
}


def read_limits(r: FieldReader, data: dict) -> Limits:
    """The `limits:` block; a missing key keeps its default, a bad one is a problem."""
    block = r.mapping(data, "limits", "limits", LIMIT_KEYS)
    if block is None:
        return Limits()
    values: dict[str, object] = {}
    for key in LIMIT_KEYS:
        if key not in block:
            continue
        where = f"limits.{key}"
        if key == "query_memory_limit":
            text = r.text(block, key, where)
            if text is not None and not _MEMORY.match(text):
                r.problem(where, f"expected a size such as 1GB or 512MB, got {text!r}")
            elif text is not None:
                values[key] = text.strip()
        elif key.endswith("_s"):
            seconds = r.number(block, key, where)
            if seconds == 0:
                r.problem(where, "expected a number of seconds > 0")
            elif seconds is not None:
                values[key] = seconds
        else:
            values[key] = r.integer(block, key, where, minimum=_MINIMUM.get(key, 1))
    return Limits(**{k: v for k, v in values.items() if v is not None})  # type: ignore[arg-type]

"""The parts of the results document shaped as nao 0.3.29 writes them (tool calls, pass metrics, costs).

nao's own viewer (`nao test server`) and scripts read these keys, with the value kinds nao
writes (an unknown run cost is null, an unknown total 0); our own keys say what is unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval_pipeline.grading import CaseMetrics
from eval_pipeline.pipeline._document import PassAggregate, PassMetrics, TestPassMetrics
from eval_pipeline.sandbox import to_json_safe

# How many rows of a query nao's `tool_calls[].result.data` carries: the file stays readable
# while the full result stays in the store.
TOOL_RESULT_ROWS = 100
# The version nao's tools stamp on their output (`_version`), which nao's readers check.
NAO_TOOL_OUTPUT_VERSION = "1"


def nao_tool_calls(
    calls: Sequence[Mapping[str, Any]] | None,
    queries: Sequence[Mapping[str, Any]] | None,
    dialect: str | None,
) -> list[dict[str, Any]]:
    """A run's tool calls as nao writes them: `toolName`, `toolCallId`, `args`, `result`; an
    `execute_sql` result is the query's `columns`, `data` (rows as objects), `row_count`,
    `dialect` and `id` (nao's id of a query nao's agent ran, which nao's verification SQL
    names; else ours). Our `error` and `duration_ms` ride along."""
    by_id = {q.get("id"): q for q in queries or []}
    shaped = []
    for call in calls or []:
        result = call.get("result")
        query = by_id.get(result.get("query_id")) if isinstance(result, dict) else None
        if query is not None:
            columns = list(query.get("columns") or [])
            rows = list(query.get("rows") or [])[:TOOL_RESULT_ROWS]
            result = {
                "columns": columns,
                "data": [
                    {c: to_json_safe(v) for c, v in zip(columns, row, strict=False)} for row in rows
                ],
                "row_count": int(query.get("row_count") or 0),
                "dialect": dialect,
                # nao's own id of the query when nao's agent ran it: nao's verification SQL
                # reads the query by that name (`FROM query_1`), as `nao test` writes it.
                "id": result.get("nao_query_id") or query.get("id"),
                "_version": NAO_TOOL_OUTPUT_VERSION,
            }
        shaped.append(
            {
                "toolName": call.get("name"),
                "toolCallId": call.get("id"),
                "args": call.get("arguments"),
                "result": result,
                "error": call.get("error"),
                "duration_ms": call.get("duration_ms"),
            }
        )
    return shaped


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else 0.0


def _test_entry(metric: CaseMetrics) -> TestPassMetrics:
    return TestPassMetrics(
        name=metric.name,
        model=metric.model,
        k=metric.attempts,
        pass_at_1=round(metric.pass_at_1, 4),
        pass_at_k=round(metric.pass_at_k, 4),
        pass_hat_k=1.0 if metric.pass_hat_k else 0.0,
    )


def _aggregate(entries: Sequence[TestPassMetrics]) -> PassAggregate:
    return PassAggregate(
        pass_at_1=_mean(e.pass_at_1 for e in entries),
        pass_at_k=_mean(e.pass_at_k for e in entries),
        pass_hat_k=_mean(e.pass_hat_k for e in entries),
    )


def pass_metrics(metrics: Sequence[CaseMetrics]) -> PassMetrics:
    """nao's `pass_metrics`: `{k, aggregate: {pass_at_1, pass_at_k, pass_hat_k}, by_test}`,
    the aggregate a mean over (test, model) pairs; k is the most attempts any pair had."""
    by_test = tuple(_test_entry(m) for m in metrics)
    return PassMetrics(
        k=max((m.attempts for m in metrics), default=0),
        aggregate=_aggregate(by_test),
        by_test=by_test,
    )


def model_pass_metrics(metrics: Sequence[CaseMetrics]) -> dict[str, tuple[int, PassAggregate]]:
    """nao's `by_model[]` keys `k` and `pass_at_1`, `pass_at_k`, `pass_hat_k`, per model."""
    groups: dict[str, list[CaseMetrics]] = defaultdict(list)
    for metric in metrics:
        groups[metric.model].append(metric)
    return {
        model: (max(m.attempts for m in group), _aggregate([_test_entry(m) for m in group]))
        for model, group in groups.items()
    }


def nao_cost(cost: float | None) -> float:
    """nao's cost totals are numbers: an unknown cost counts 0 there (our keys say unknown);
    a run's own `cost` is null when unknown, as nao writes it."""
    return 0 if cost is None else cost


def comparison_text(diff: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The rows of a failed data comparison as text, nao's `details.comparison` (its viewer
    shows it under "Diff"): our `_side` / `_row` columns first, then the compared columns;
    None without differing rows."""
    if not diff:
        return None
    columns = list(dict.fromkeys(key for row in diff for key in row))
    cells = [[_cell(row.get(c)) for c in columns] for row in diff]
    header = ["side" if c == "_side" else "row" if c == "_row" else c for c in columns]
    widths = [max(len(text) for text in column) for column in zip(header, *cells, strict=True)]
    lines = [header, *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)

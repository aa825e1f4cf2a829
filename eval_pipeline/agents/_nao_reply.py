"""Reading nao's `/api/test/run` reply: the text, tool calls and their `execute_sql` rows as queries, usage, cost, and nao's verification with its verdict."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.agents._nao_verdict import nao_data_verdict
from eval_pipeline.agents._types import QueryRecord, ToolCallRecord, Usage
from eval_pipeline.agents._wire import BodyReader
from eval_pipeline.suite import Case, Tolerance

__all__ = ["read_reply"]


def read_reply(reader: BodyReader, case: Case, tolerance: Tolerance | None) -> dict[str, Any]:
    """The run's parts from a `/api/test/run` body (nao-core 0.3.x's `TestResult`): `text`,
    `tool_calls`, `queries`, `usage`, `cost_usd`, and `details` (nao's verification and verdict,
    or a `verdict_note` saying why the verdict could not be computed).

    Raises:
        ProtocolError: a field is missing or of the wrong kind, naming it.
    """
    body = reader.root()
    text = reader.field(body, "text", "text", str)
    calls = reader.field(body, "toolCalls", "toolCalls", list, required=False, default=[])
    tool_calls: list[ToolCallRecord] = []
    queries: list[QueryRecord] = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            reader.fail(f"`toolCalls[{i}]` must be an object, got {type(call).__name__}")
        tool_calls.append(_tool_call(reader, call, i, queries))
    usage = reader.field(body, "usage", "usage", dict, required=False, default={})
    cost = reader.field(body, "cost", "cost", dict, required=False, default={})
    verification = reader.field(
        body, "verification", "verification", dict, required=False, default=None
    )
    details: dict[str, Any] = {
        "finish_reason": reader.field(body, "finishReason", "finishReason", str, required=False),
        "duration_ms": reader.field(body, "durationMs", "durationMs", float, required=False),
        "usage": usage,
        "cost": cost,
        "verification": None,
        "verdict": None,
    }
    if verification is not None:
        details["verification"] = kept = _verification(reader, verification)
        try:
            details["verdict"] = _verdict(kept, case.comparison or tolerance)
        except Exception as failure:  # a second opinion: its failure must not cost the run
            details["verdict_note"] = _verdict_note(failure)
    return {
        "text": text,
        "tool_calls": tool_calls,
        "queries": queries,
        "usage": Usage(
            input_tokens=reader.count(usage, "inputTotalTokens", "usage.inputTotalTokens"),
            cached_input_tokens=reader.count(
                usage, "inputCacheReadTokens", "usage.inputCacheReadTokens"
            ),
            output_tokens=reader.count(usage, "outputTotalTokens", "usage.outputTotalTokens"),
        ),
        "cost_usd": reader.amount(cost, "totalCost", "cost.totalCost"),
        "details": details,
    }


def _tool_call(
    reader: BodyReader, call: dict[str, Any], index: int, queries: list[QueryRecord]
) -> ToolCallRecord:
    path = f"toolCalls[{index}]"
    name = reader.field(call, "toolName", f"{path}.toolName", str)
    arguments = call.get("args")
    record = ToolCallRecord(
        id=reader.field(call, "toolCallId", f"{path}.toolCallId", str, required=False)
        or f"call_{index + 1}",
        name=name,
        arguments=arguments if isinstance(arguments, dict) else None,
        raw_arguments=json.dumps(arguments, default=str, ensure_ascii=False),
        result=call.get("result"),
    )
    if "result" not in call:
        record.error = "nao's backend returned no result for this call (the tool failed)"
    if name == "execute_sql":
        _record_query(reader, record, path, queries)
    return record


def _record_query(
    reader: BodyReader, record: ToolCallRecord, path: str, queries: list[QueryRecord]
) -> None:
    """An `execute_sql` call as one of the run's queries, its rows row lists as ours are;
    the call keeps a summary of its result (its rows live in the query)."""
    arguments = record.arguments or {}
    sql = arguments.get("sql_query")
    query = QueryRecord(id=f"q{len(queries) + 1}", sql=sql if isinstance(sql, str) else "")
    queries.append(query)
    result = record.result
    if not isinstance(result, dict) or not isinstance(result.get("data"), list):
        query.error = record.error or _result_error(result)
        record.error = query.error
        return
    data = result["data"]
    columns = result.get("columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        columns = list(data[0]) if data and isinstance(data[0], dict) else []
    for j, row in enumerate(data):
        if not isinstance(row, dict):
            reader.fail(f"`{path}.result.data[{j}]` must be an object (column → value)")
    query.columns = list(columns)
    query.rows = [[row.get(c) for c in columns] for row in data]
    count = result.get("row_count")
    query.row_count = count if isinstance(count, int) and not isinstance(count, bool) else len(data)
    query.truncated = query.row_count > len(data)
    record.result = {
        "query_id": query.id,
        "nao_query_id": result.get("id"),
        "columns": query.columns,
        "row_count": query.row_count,
        "dialect": result.get("dialect"),
    }


def _result_error(result: Any) -> str:
    if isinstance(result, dict) and isinstance(result.get("error"), str):
        return result["error"]
    if isinstance(result, str) and result:
        return result
    return "the query returned no rows to read (nao's result holds no `data`)"


def _verification(reader: BodyReader, verification: dict[str, Any]) -> dict[str, Any]:
    """nao's verification as it came."""
    data = reader.field(verification, "data", "verification.data", list, required=False)
    expected = reader.field(
        verification, "expectedData", "verification.expectedData", list, required=False
    )
    columns = reader.field(
        verification, "expectedColumns", "verification.expectedColumns", list, required=False
    )
    error = reader.field(verification, "error", "verification.error", str, required=False)
    for where, rows in (("data", data), ("expectedData", expected)):
        if rows and not all(isinstance(row, dict) for row in rows):
            reader.fail(f"`verification.{where}` must be a list of objects (column → value)")
    return {
        "sql": reader.field(verification, "sql", "verification.sql", str, required=False),
        "data": data,
        "expected_data": expected or [],
        "expected_columns": [str(c) for c in columns or []],
        "error": error,
    }


def _verdict(verification: dict[str, Any], tolerance: Tolerance | None) -> dict[str, Any]:
    """The verdict nao's comparison gives `verification`."""
    verdict = nao_data_verdict(
        verification["data"],
        verification["expected_data"],
        verification["expected_columns"],
        error=verification["error"],
        tolerance=tolerance,
    )
    return {"passed": verdict.passed, "message": verdict.message}


def _verdict_note(failure: Exception) -> str:
    """Why nao's verdict is missing, in one bounded line."""
    problem = " ".join(str(failure).split())
    if len(problem) > 200:
        problem = problem[:200] + "…"
    return (
        f"nao's comparison could not be computed ({type(failure).__name__}: {problem}); "
        "our grade of the run stands"
    )

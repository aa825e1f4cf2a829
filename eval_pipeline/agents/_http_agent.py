"""External agents under test (`http:<name>`), spoken to over the HTTP protocol of docs/agent-protocol.md."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from eval_pipeline.agents._retry import DEFAULT_RETRY_POLICY, RetryPolicy, send_with_retry
from eval_pipeline.agents._types import AgentRun, QueryRecord, ToolCallRecord, Usage
from eval_pipeline.agents._wire import BodyReader
from eval_pipeline.suite import AgentConfig, Case

__all__ = ["AgentReply", "HttpAgent", "agent_request", "parse_agent_reply"]


@dataclass
class AgentReply:
    """A validated reply of an external agent."""

    text: str
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    queries: list[QueryRecord] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None


def agent_request(case: Case, *, attempt: int) -> dict[str, Any]:
    """The request body of the protocol (a contract: docs/agent-protocol.md)."""
    return {
        "test": case.name,
        "messages": [{"role": m.role, "content": m.content} for m in case.messages],
        "attempt": attempt,
        "test_mode": True,
    }


class HttpAgent:
    """An agent under test behind `POST <url>`; one call per run.

    Args:
        config: the agent's entry in eval_config.yaml; header templates are resolved at
            each request, so secrets live only in the request itself.
        client: the pooled client (its timeout is the agent's `timeout_s`).
        policy: the retry policy (the one every HTTP call uses).
        environ: where `{{ env('NAME') }}` reads from; None means `os.environ`.
    """

    def __init__(
        self,
        config: AgentConfig,
        client: httpx.AsyncClient,
        *,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.model_id = f"http:{config.name}"
        self._client = client
        self._policy = policy
        self._environ = dict(environ) if environ is not None else None

    def __repr__(self) -> str:
        return f"HttpAgent({self.model_id!r}, url={self.config.url!r})"

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        """Send `case` to the agent and fill `run` with its reply; see `Agent.run`.

        Raises:
            ProviderError: non-2xx after retries, a timeout, or a reply that breaks the
                protocol (`ProtocolError`, naming the field).
            MissingSecret: a header reads an environment variable that is not set.
        """
        request = agent_request(case, attempt=attempt)
        headers = {
            name: value.resolve(self._environ) for name, value in self.config.headers.items()
        }
        response = await send_with_retry(
            self._client,
            "POST",
            self.config.url,
            endpoint=self.model_id,
            json=request,
            headers=headers,
            policy=self._policy,
        )
        reply = parse_agent_reply(BodyReader(response, endpoint=self.model_id))
        # The run is only touched once the whole reply is valid, so an error leaves it clean.
        run.final_text = reply.text
        run.messages = [*request["messages"], {"role": "assistant", "content": reply.text}]
        run.tool_calls = reply.tool_calls
        run.queries = reply.queries
        run.answer = reply.answer
        run.usage = reply.usage
        run.cost_usd = reply.cost_usd
        run.turns = 1


def parse_agent_reply(reader: BodyReader) -> AgentReply:
    """Validate a reply body against the protocol; only `text` is required."""
    body = reader.root()
    reply = AgentReply(text=reader.field(body, "text", "text", str))
    for i, call in enumerate(_objects(reader, body, "tool_calls")):
        path = f"tool_calls[{i}]"
        arguments = reader.field(call, "arguments", f"{path}.arguments", dict, required=False)
        reply.tool_calls.append(
            ToolCallRecord(
                id=reader.field(call, "id", f"{path}.id", str, required=False) or f"call_{i + 1}",
                name=reader.field(call, "name", f"{path}.name", str),
                arguments=arguments if arguments is not None else {},
                raw_arguments=json.dumps(arguments if arguments is not None else {}),
                result=call.get("result"),
                error=reader.field(call, "error", f"{path}.error", str, required=False),
            )
        )
    for i, query in enumerate(_objects(reader, body, "queries")):
        path = f"queries[{i}]"
        columns, rows = _table(reader, query, path, required=False)
        reply.queries.append(
            QueryRecord(
                id=reader.field(query, "id", f"{path}.id", str, required=False) or f"q{i + 1}",
                sql=reader.field(query, "sql", f"{path}.sql", str),
                columns=columns,
                rows=rows,
                row_count=len(rows),
                error=reader.field(query, "error", f"{path}.error", str, required=False),
            )
        )
    answer = reader.field(body, "answer", "answer", dict, required=False)
    if answer is not None:
        columns, rows = _table(reader, answer, "answer", required=True)
        reply.answer = {"columns": columns, "rows": rows}
    usage = reader.field(body, "usage", "usage", dict, required=False, default={})
    tokens = {
        key: reader.count(usage, key, f"usage.{key}")
        for key in ("input_tokens", "cached_input_tokens", "output_tokens")
    }
    reply.usage = Usage(**tokens)
    reply.cost_usd = reader.amount(body, "cost_usd", "cost_usd")
    return reply


def _objects(reader: BodyReader, body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = reader.field(body, key, key, list, required=False, default=[])
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            reader.fail(f"`{key}[{i}]` must be an object, got {type(item).__name__}")
    return items


def _table(
    reader: BodyReader, container: dict[str, Any], path: str, *, required: bool
) -> tuple[list[str], list[list[Any]]]:
    columns = reader.field(container, "columns", f"{path}.columns", list, required=required) or []
    for j, column in enumerate(columns):
        if not isinstance(column, str):
            reader.fail(f"`{path}.columns[{j}]` must be a string")
    rows = reader.field(container, "rows", f"{path}.rows", list, required=required) or []
    for j, row in enumerate(rows):
        if not isinstance(row, list):
            reader.fail(f"`{path}.rows[{j}]` must be a list (one value per column)")
        if columns and len(row) != len(columns):
            reader.fail(f"`{path}.rows[{j}]` has {len(row)} values for {len(columns)} columns")
    return list(columns), [list(row) for row in rows]

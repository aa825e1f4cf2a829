"""The built-in analytics agent: an LLM in a tool loop over the warehouse (list, describe, query)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.agents._catalog import WarehouseCatalog
from eval_pipeline.agents._chat import ChatModel
from eval_pipeline.agents._errors import AgentError, ReplyTruncated
from eval_pipeline.agents._pricing import cost_usd
from eval_pipeline.agents._threads import in_daemon_thread
from eval_pipeline.agents._types import (
    AgentRun,
    ChatMessage,
    QueryRecord,
    RequestedToolCall,
    ToolCallRecord,
    ToolSpec,
    Usage,
)
from eval_pipeline.sandbox import SandboxError, ServerSandbox, SqlSandbox
from eval_pipeline.suite import AgentContext, Case, ContextFile

LIST_TABLES = ToolSpec(
    "list_tables",
    "List the warehouse's tables with their descriptions.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)
DESCRIBE_TABLE = ToolSpec(
    "describe_table",
    "Show a table's columns with their types and documentation.",
    {
        "type": "object",
        "properties": {"table_name": {"type": "string", "description": "The table, e.g. orders"}},
        "required": ["table_name"],
    },
)


def execute_sql_tool(engine: str = "DuckDB") -> ToolSpec:
    """The `execute_sql` tool, naming the SQL dialect the warehouse speaks."""
    return ToolSpec(
        "execute_sql",
        f"Run one read-only {engine} SQL query on the warehouse and get its result (the first "
        "rows and the row count).",
        {
            "type": "object",
            "properties": {
                "sql_query": {"type": "string", "description": f"One {engine} SELECT statement"}
            },
            "required": ["sql_query"],
        },
    )


EXECUTE_SQL = execute_sql_tool()
CLARIFICATION = ToolSpec(
    "clarification",
    "Ask the user a question when the request is ambiguous and you cannot make a reasonable "
    "assumption. The conversation then waits for the user.",
    {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "The question for the user"}},
        "required": ["question"],
    },
)
#: Every tool the built-in agent may offer (docs/writing-tests.md documents each).
BUILTIN_TOOLS = (LIST_TABLES, DESCRIBE_TABLE, EXECUTE_SQL, CLARIFICATION)

SYSTEM_PROMPT = """\
You are a data analyst answering business questions about a {engine} warehouse.
Use the tools to find the right tables and columns, then run SQL to get the answer. Follow \
the business definitions below exactly. Answer in a few sentences with the figures, and \
state any assumption you made. {test_mode}

# Business definitions and context
{context}

# Tables
{tables}
"""
TEST_MODE_NOTE = (
    "You cannot ask the user follow-up questions: when something is ambiguous, make a "
    "reasonable assumption, say it, and answer."
)


@dataclass(frozen=True)
class AgentLimits:
    """Bounds on one run, so a model stuck in a loop costs little and ends clearly.

    Args:
        max_turns: completions per run; a run still calling tools after this is an error.
        max_total_tokens: input + output tokens per run.
        max_tokens_per_completion: the `max_tokens` of each completion.
    """

    max_turns: int = 15
    max_total_tokens: int = 400_000
    max_tokens_per_completion: int = 4096


class LimitExceeded(AgentError):
    """The agent did not finish within its turn or token limits."""


def system_prompt(
    context: AgentContext,
    catalog: WarehouseCatalog,
    *,
    test_mode: bool,
    engine: str = "DuckDB",
    stored: bool = False,
) -> str:
    """The built-in agent's system prompt; `stored`: as a run keeps it, the context files
    referred to by the context's hash (their text is stored once, not with every run)."""
    return SYSTEM_PROMPT.format(
        engine=engine,
        test_mode=TEST_MODE_NOTE if test_mode else "",
        context=context.stored_text if stored else context.prompt_text,
        tables=catalog.list_text(),
    )


#: Characters of synced docs shown with one table: a table's preview can be long.
MAX_SYNCED_DOCS_CHARS = 20_000


def synced_docs_text(docs: Sequence[ContextFile]) -> str:
    """The synced docs of a table (nao sync's columns.md, preview.md, ...) after its columns,
    cut at MAX_SYNCED_DOCS_CHARS; "" when there are none."""
    if not docs:
        return ""
    text = "\n\n".join(f"## {doc.label}\n{doc.text.strip()}" for doc in docs)
    if len(text) > MAX_SYNCED_DOCS_CHARS:
        text = text[:MAX_SYNCED_DOCS_CHARS] + "\n(cut: the docs go on)"
    return "\n\nDocs:\n" + text


def _expects_clarification(case: Case) -> bool:
    # Test mode removes `clarification` (a test must not wait for a person), except for a
    # test whose point is to check that the agent asks.
    return any(a.tool == CLARIFICATION.name for a in case.assertions) or any(
        t.tool == CLARIFICATION.name for t in case.tool_calls
    )


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    """The message as the run keeps it: role and content, and only the fields it has."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = tuple(dict(vars(call)) for call in message.tool_calls)
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
    if message.name:
        data["name"] = message.name
    return data


class BuiltinAgent:
    """Runs a case with a chat model in a tool loop over the warehouse.

    Args:
        model: the LLM that drives the loop.
        sandbox: where `execute_sql` runs (read-only, time-limited, row-capped).
        catalog: the tables, columns and dbt docs behind `list_tables` / `describe_table`.
        context: the suite's context files, put in the system prompt.
        limits: turn and token bounds.
        test_mode: remove `clarification` unless the case expects it (nao's test mode).
    """

    def __init__(
        self,
        model: ChatModel,
        sandbox: SqlSandbox | ServerSandbox,
        catalog: WarehouseCatalog,
        context: AgentContext,
        *,
        limits: AgentLimits | None = None,
        test_mode: bool = True,
    ) -> None:
        self.model = model
        self.model_id = model.model_id
        self.sandbox = sandbox
        self.catalog = catalog
        self.limits = limits or AgentLimits()
        self.test_mode = test_mode
        # A server sandbox names its engine; the DuckDB sandbox keeps the DuckDB wording.
        engine = getattr(sandbox, "engine_name", "DuckDB")
        self.context = context
        self.system = system_prompt(context, catalog, test_mode=test_mode, engine=engine)
        self.stored_system = system_prompt(
            context, catalog, test_mode=test_mode, engine=engine, stored=True
        )
        self._sql_tool = EXECUTE_SQL if engine == "DuckDB" else execute_sql_tool(engine)

    def tools_for(self, case: Case) -> list[ToolSpec]:
        tools = [LIST_TABLES, DESCRIBE_TABLE, self._sql_tool]
        if not self.test_mode or _expects_clarification(case):
            tools.append(CLARIFICATION)
        return tools

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        tools = self.tools_for(case)
        tool_names = {t.name for t in tools}
        messages = [ChatMessage("system", self.system)]
        messages += [ChatMessage(m.role, m.content) for m in case.messages]
        usage = Usage()
        calls: list[ToolCallRecord] = []
        queries: list[QueryRecord] = []
        final_text: str | None = None
        turns = 0
        try:
            while final_text is None:
                if turns >= self.limits.max_turns:
                    raise LimitExceeded(
                        f"the agent was still calling tools after {turns} turns (limit {self.limits.max_turns})"
                    )
                if usage.total_tokens >= self.limits.max_total_tokens:
                    raise LimitExceeded(
                        f"the agent used {usage.total_tokens:,} tokens without answering (limit {self.limits.max_total_tokens:,})"
                    )
                cut: ReplyTruncated | None = None
                try:
                    completion = await self.model.complete(
                        messages, tools=tools, max_tokens=self.limits.max_tokens_per_completion
                    )
                except ReplyTruncated as error:
                    cut, completion = error, error.completion
                turns += 1
                usage.add(completion.usage)
                messages.append(
                    ChatMessage("assistant", completion.text, tool_calls=completion.tool_calls)
                )
                if cut is not None:
                    # The cut turn is kept above (it is paid for and shows where the model
                    # stopped), but it is no answer: the run is an error.
                    raise cut
                if not completion.tool_calls:
                    final_text = completion.text
                    break
                for requested in completion.tool_calls:
                    record, reply, question = await self._call_tool(requested, tool_names, queries)
                    calls.append(record)
                    messages.append(
                        ChatMessage("tool", reply, tool_call_id=requested.id, name=requested.name)
                    )
                    if question is not None:
                        final_text = question  # the agent asked the user: the run ends here
        finally:
            run.messages = [_message_dict(m) for m in messages]
            run.messages[0]["content"] = self.stored_system
            run.tool_calls = calls
            run.queries = queries
            run.usage = usage
            run.turns = turns
            run.cost_usd = cost_usd(usage, self.model.costs)
        run.final_text = final_text

    async def _call_tool(
        self, requested: RequestedToolCall, available: set[str], queries: list[QueryRecord]
    ) -> tuple[ToolCallRecord, str, str | None]:
        """Run one tool call; returns its record, the text for the model, and a question
        for the user when the tool was `clarification`."""
        record = ToolCallRecord(
            requested.id, requested.name, requested.arguments, requested.raw_arguments
        )
        started = time.perf_counter()
        question = None
        if requested.name not in available:
            reply = f"Error: unknown tool {requested.name!r}. Available tools: {', '.join(sorted(available))}."
            record.error = reply
        elif requested.arguments is None:
            reply = (
                f"Error: the arguments of {requested.name} were not a valid JSON object "
                f"({requested.raw_arguments[:200]!r}). Call the tool again with JSON arguments."
            )
            record.error = reply
        else:
            reply, question = await self._dispatch(requested, record, queries)
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        return record, reply, question

    async def _dispatch(
        self, requested: RequestedToolCall, record: ToolCallRecord, queries: list[QueryRecord]
    ) -> tuple[str, str | None]:
        arguments = requested.arguments or {}
        if requested.name == LIST_TABLES.name:
            reply = self.catalog.list_text()
            record.result = {"tables": [t.qualified_name for t in self.catalog.tables]}
            return reply, None
        if requested.name == DESCRIBE_TABLE.name:
            name = str(arguments.get("table_name") or "")
            table = self.catalog.find(name)
            if table is None:
                record.error = (
                    f"Error: no table named {name!r}. Call list_tables to see the tables."
                )
                return record.error, None
            reply = self.catalog.describe_text(table) + synced_docs_text(
                self.context.docs_of(table.name, table.schema)
            )
            record.result = {
                "table": table.qualified_name,
                "columns": [c.name for c in table.columns],
            }
            return reply, None
        if requested.name == CLARIFICATION.name:
            question = (
                str(arguments.get("question") or "").strip()
                or "(the agent asked for clarification)"
            )
            record.result = {"question": question}
            return "The question was sent to the user.", question
        return await self._execute_sql(arguments, record, queries), None

    async def _execute_sql(
        self, arguments: dict[str, Any], record: ToolCallRecord, queries: list[QueryRecord]
    ) -> str:
        sql = arguments.get("sql_query")
        if not isinstance(sql, str) or not sql.strip():
            record.error = "Error: execute_sql needs `sql_query`, a SQL string."
            return record.error
        query = QueryRecord(
            id=f"q{len(queries) + 1}", sql=sql, row_cap=self.sandbox.limits.store_max_rows
        )
        queries.append(query)
        try:
            result = await in_daemon_thread(self.sandbox.execute, sql)
        except SandboxError as error:
            query.error = str(error)
            record.error = f"Error: {error}"
            record.result = {"query_id": query.id}
            return record.error
        result = result.in_stable_order(getattr(self.sandbox, "dialect", "duckdb"))
        query.columns = list(result.columns)
        query.column_types = list(result.column_types)
        query.rows = [list(row) for row in result.rows]
        query.row_count = result.row_count
        query.truncated = result.truncated
        query.duration_ms = result.duration_ms
        query.note = result.note
        reply = self.sandbox.render(result)
        record.result = {
            "query_id": query.id,
            "columns": query.columns,
            "row_count": query.row_count,
            "truncated": query.truncated,
            "note": query.note,
            "preview": reply[:2000],
        }
        return reply

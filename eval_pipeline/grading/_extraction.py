"""Answer extraction: turn what the agent queried into the table to compare with the reference.

nao's method: every `execute_sql` result of the run is loaded into an in-memory DuckDB as a
table named after its query id (rows go in as newline-delimited JSON, so DuckDB infers the
types), and the extraction model writes one DuckDB query over those tables returning the
expected columns. The model never retypes numbers, so nothing is lost to transcription.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb
import pandas as pd

from eval_pipeline.agents import (
    AgentError,
    AgentRun,
    ChatMessage,
    QueryRecord,
)
from eval_pipeline.grading._reference import frame_from_rows
from eval_pipeline.sandbox import QueryResult, SandboxError, SandboxLimits, SqlSandbox

if TYPE_CHECKING:
    from eval_pipeline.agents import ChatModel

Strategy = Literal["llm", "last_query"]
NO_ANSWER = "NO_ANSWER"
_SAMPLE_ROWS = 5
_LIMITS = SandboxLimits(timeout_s=20.0, store_max_rows=100_000, model_max_rows=20)
_SQL_BLOCK = re.compile(r"```(?:sql|duckdb)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)

EXTRACTION_SYSTEM = f"""\
You turn the results an analytics assistant fetched into the table its final answer states.
The assistant's query results are loaded in DuckDB, one table per query. Write ONE DuckDB \
SELECT over those tables only, returning exactly the requested columns, in that order, \
with those names, holding the values the assistant's answer gives. Select or aggregate \
rows; never type numbers or strings from the answer into the query. If the tables do not \
contain the answer, reply {NO_ANSWER}. Reply with the SQL in a ```sql block, nothing else."""


@dataclass(frozen=True)
class Extraction:
    """The agent's answer as a table, or why there is none.

    `status` "ok" has the table (`columns`, `rows`); "no_answer" means the agent's data holds
    no answer (the run fails the data check); "error" means extraction itself could not be
    done (the check is an error, not a failure of the agent).
    """

    status: Literal["ok", "no_answer", "error"]
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    source: str = ""
    query: str | None = None
    message: str = ""
    model: str | None = None  # the extraction model that was asked, if one was
    #: "error" because the extraction model did not answer: the next grading asks again. A
    #: query of its that does not run is its answer, kept and not asked again.
    retry: bool = False

    @property
    def frame(self) -> pd.DataFrame | None:
        """The table as a DataFrame (`frame_from_rows`), None without one."""
        return None if self.columns is None else frame_from_rows(self.columns, self.rows or [])


def _successful(queries: Sequence[QueryRecord]) -> list[QueryRecord]:
    return [q for q in queries if q.error is None and q.columns]


def _unique(names: Sequence[str]) -> list[str]:
    """The names made distinct as DuckDB sees them (case-insensitively): `x, x` → `x, x_1`.

    A generated name never takes one the list already holds, so `x, x, x_1` keeps all three
    columns (`x, x_2, x_1`) instead of overwriting one with another.
    """
    given = {name.lower() for name in names if name}
    taken: set[str] = set()
    unique = []
    for original in names:
        base = original or "column"
        name, n = base, 0
        while name.lower() in taken or (name != original and name.lower() in given):
            n += 1
            name = f"{base}_{n}"
        taken.add(name.lower())
        unique.append(name)
    return unique


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table_name(query_id: str) -> str:
    name = re.sub(r"\W", "_", query_id)
    return name if name and not name[0].isdigit() else f"q_{name}"


def _table_names(queries: Sequence[QueryRecord]) -> list[str]:
    # An external agent may send two queries with one id, or ids that read alike once
    # sanitised (`q-1`, `q_1`): every query still gets a table of its own.
    return _unique([_table_name(query.id) for query in queries])


def _load_tables(queries: Sequence[QueryRecord], folder: Path):
    def setup(connection: duckdb.DuckDBPyConnection) -> None:
        for query, table in zip(queries, _table_names(queries), strict=True):
            columns = _unique(query.columns)
            if not query.rows:
                types = query.column_types or ["VARCHAR"] * len(columns)
                spec = ", ".join(f"{_quote(c)} {t}" for c, t in zip(columns, types, strict=False))
                connection.execute(f"CREATE TABLE {_quote(table)} ({spec})")
                continue
            path = folder / f"{table}.jsonl"
            with open(path, "w", encoding="utf-8") as handle:
                for row in query.rows:
                    handle.write(
                        json.dumps(dict(zip(columns, row, strict=False)), default=str) + "\n"
                    )
            connection.execute(
                f"CREATE TABLE {_quote(table)} AS "
                "SELECT * FROM read_json_auto(?, format = 'newline_delimited')",
                [str(path)],
            )

    return setup


def _describe(queries: Sequence[QueryRecord]) -> str:
    parts = []
    for query, table in zip(queries, _table_names(queries), strict=True):
        columns = ", ".join(_unique(query.columns))
        sample = "\n".join(json.dumps(row, default=str) for row in query.rows[:_SAMPLE_ROWS])
        parts.append(
            f"Table {table} ({query.row_count} rows; columns: {columns}) from the query:\n"
            f"{query.sql}\nFirst rows:\n{sample or '(none)'}"
        )
    return "\n\n".join(parts)


def parse_sql_reply(text: str) -> str | None:
    """The SQL in a model's reply (a fenced block, or the bare text); None for NO_ANSWER."""
    if NO_ANSWER in text and "select" not in text.lower():
        return None
    match = _SQL_BLOCK.search(text)
    sql = (match.group(1) if match else text).strip().rstrip(";").strip()
    return sql or None


def extract_last_query(run: AgentRun) -> Extraction:
    """The result of the run's last successful query, taken as the answer (no model call)."""
    queries = _successful(run.queries)
    if not queries:
        return Extraction(
            "no_answer", source="last_query", message="the agent ran no successful query"
        )
    last = queries[-1]
    return Extraction("ok", list(last.columns), last.rows, source="last_query", query=last.sql)


def rerun_extraction(
    queries: Sequence[QueryRecord], extraction_query: str
) -> Callable[[SqlSandbox], QueryResult]:
    """nao's extraction replayed on another database, with no model call: the run's
    successful queries re-run there, and the stored extraction query over their results.

    The returned function raises `SandboxError` when one of the agent's queries, or the
    extraction query, fails on that database (the semantic check reports it as a failure).
    """
    successful = _successful(queries)

    def run(database: SqlSandbox) -> QueryResult:
        rerun = []
        for query in successful:
            result = database.execute(query.sql)
            rerun.append(
                replace(
                    query,
                    columns=list(result.columns),
                    column_types=list(result.column_types),
                    rows=[list(row) for row in result.rows],
                    row_count=result.row_count,
                )
            )
        with tempfile.TemporaryDirectory(prefix="eval-extract-") as folder:
            try:
                memory = SqlSandbox.in_memory(_load_tables(rerun, Path(folder)), limits=_LIMITS)
            except duckdb.Error as error:
                raise SandboxError(
                    f"the agent's query results could not be loaded: {error}"
                ) from error
            with memory:
                return memory.execute(extraction_query)

    return run


async def extract_answer(
    run: AgentRun,
    expected_columns: Sequence[str],
    *,
    strategy: Strategy = "llm",
    model: ChatModel | None = None,
) -> Extraction:
    """The agent's answer as a table with the expected columns.

    Args:
        run: a completed run; an external agent's `answer` is used as given.
        expected_columns: the reference result's columns, which the extraction returns.
        strategy: "llm" (nao's method, needs `model`) or "last_query" (no model call: the
            last successful query is the answer, for agents whose final query is the answer).
        model: the extraction model.
    """
    if run.answer is not None:
        columns, rows = run.answer.get("columns") or [], run.answer.get("rows") or []
        return Extraction("ok", list(columns), [list(r) for r in rows], source="answer")
    if strategy == "last_query":
        return extract_last_query(run)
    queries = _successful(run.queries)
    if not queries:
        return Extraction("no_answer", source="llm", message="the agent ran no successful query")
    if model is None:
        return Extraction(
            "error", source="llm", message="no extraction model configured: set test.judge_model"
        )
    with tempfile.TemporaryDirectory(prefix="eval-extract-") as folder:
        try:
            sandbox = SqlSandbox.in_memory(_load_tables(queries, Path(folder)), limits=_LIMITS)
        except duckdb.Error as error:  # data DuckDB cannot load: say so, do not crash the grading
            return Extraction(
                "error",
                source="llm",
                message=f"the agent's query results could not be loaded: {error}",
            )
        with sandbox:
            extraction = await _extract_with_model(run, expected_columns, queries, sandbox, model)
        return replace(extraction, model=model.model_id)


async def _extract_with_model(
    run: AgentRun,
    expected_columns: Sequence[str],
    queries: Sequence[QueryRecord],
    sandbox: SqlSandbox,
    model: ChatModel,
) -> Extraction:
    prompt = (
        f"Columns to return, in order: {', '.join(expected_columns)}\n\n"
        f"The assistant's final answer:\n{run.final_text or '(no text)'}\n\n{_describe(queries)}"
    )
    messages = [ChatMessage("system", EXTRACTION_SYSTEM), ChatMessage("user", prompt)]

    def outcome(text: str) -> Extraction | str:
        """The extraction a reply gives, or why its query failed."""
        sql = parse_sql_reply(text)
        if sql is None:
            return Extraction(
                "no_answer", source="llm", message="the agent's query results hold no answer"
            )
        try:
            result = sandbox.execute(sql)
        except SandboxError as error:
            return str(error)
        return Extraction(
            "ok", list(result.columns), [list(r) for r in result.rows], source="llm", query=sql
        )

    last_error = ""
    for attempt in range(2):  # one repair attempt, carrying the error
        try:
            completion = await model.complete(messages, tools=(), max_tokens=1024)
        except AgentError as error:
            return Extraction(
                "error",
                source="llm",
                message=f"extraction model unavailable: {error}",
                retry=True,
            )
        result = outcome(completion.text)
        if isinstance(result, Extraction):
            return result
        last_error = result
        if attempt == 0:
            messages += [
                ChatMessage("assistant", completion.text),
                ChatMessage(
                    "user", f"That query failed:\n{last_error}\nReply with a corrected query."
                ),
            ]
    return Extraction(
        "error", source="llm", message=f"the extraction query failed twice: {last_error}"
    )

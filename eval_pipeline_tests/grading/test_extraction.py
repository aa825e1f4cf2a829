"""Answer extraction (nao's method) with a scripted model: the agent's query results become
tables q1..qn in a locked in-memory DuckDB, and the model's one query over them is the answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.agents import AgentRun, CachedChatModel, MemoryCache, QueryRecord
from eval_pipeline.grading import (
    Extraction,
    Grader,
    GradeStatus,
    ReferenceResult,
    compare_results,
    extract_answer,
)
from eval_pipeline.suite import Case, Message
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    answer,
    error,
    open_chat_model,
    repeat,
)

BY_REGION = QueryRecord(
    "q1",
    "SELECT region, order_count, revenue, first_order FROM sales GROUP BY region",
    columns=["region", "order_count", "revenue", "first_order"],
    column_types=["VARCHAR", "BIGINT", "DECIMAL(18,2)", "DATE"],
    rows=[
        ["north", 12, 1250.5, "2024-01-03"],
        ["south", 7, 980.25, "2024-02-11"],
        ["west", 3, 310.0, "2024-03-30"],
    ],
    row_count=3,
)
TOTAL = QueryRecord(
    "q2", "SELECT SUM(revenue) AS total FROM sales", ["total"], ["DOUBLE"], [[2540.75]], 1
)
FAILED = QueryRecord("q3", "SELECT nope FROM sales", error="Binder Error: nope")
FINAL_TEXT = "North leads with $1,250.50 over 12 orders."


@pytest.fixture
def model_server() -> Iterator[ScriptedServer]:
    """The extraction model: an OpenAI-compatible server scripted per test."""
    with ScriptedServer("openai") as server:
        yield server


def agent_run(*queries: QueryRecord, answer: dict | None = None) -> AgentRun:
    return AgentRun(
        "top_region",
        "openai:gpt-4.1",
        0,
        date(2026, 1, 1),
        "input",
        "context",
        final_text=FINAL_TEXT,
        queries=list(queries),
        answer=answer,
    )


def sql(text: str) -> str:
    return f"```sql\n{text}\n```"


def extract(
    server: ScriptedServer, run: AgentRun, columns=("region", "revenue"), **options
) -> Extraction:
    async def go() -> Extraction:
        async with open_chat_model(server) as model:
            return await extract_answer(run, list(columns), model=model, **options)

    return asyncio.run(go())


def rows(extraction: Extraction) -> list[list]:
    assert extraction.frame is not None, extraction.message
    return extraction.frame.astype(object).values.tolist()


def last_user_text(request: RecordedRequest) -> str:
    return request.messages[-1]["content"]


def test_the_prompt_shows_the_expected_columns_the_reply_and_every_successful_query(
    model_server,
):
    model_server.script(answer(sql("SELECT region, revenue FROM q1 WHERE region = 'north'")))
    extraction = extract(model_server, agent_run(BY_REGION, FAILED, TOTAL))

    assert extraction.status == "ok" and extraction.source == "llm"
    assert rows(extraction) == [["north", 1250.5]]
    assert extraction.query == "SELECT region, revenue FROM q1 WHERE region = 'north'"
    [request] = model_server.requests
    system, user = request.messages
    assert system["role"] == "system" and "NO_ANSWER" in system["content"]
    prompt = user["content"]
    assert "Columns to return, in order: region, revenue" in prompt
    assert FINAL_TEXT in prompt
    assert "Table q1 (3 rows; columns: region, order_count, revenue, first_order)" in prompt
    assert BY_REGION.sql in prompt and TOTAL.sql in prompt
    assert '["north", 12, 1250.5, "2024-01-03"]' in prompt
    assert "q3" not in prompt and FAILED.sql not in prompt  # a failed query is no table


def test_tables_keep_their_types_ints_decimals_and_dates(model_server):
    model_server.script(
        answer(
            sql(
                "SELECT typeof(region), typeof(order_count), typeof(revenue), "
                "typeof(first_order) FROM q1 LIMIT 1"
            )
        )
    )
    typed = extract(model_server, agent_run(BY_REGION))
    assert rows(typed) == [["VARCHAR", "BIGINT", "DOUBLE", "DATE"]]

    # dates compare as dates, ints stay ints, decimals stay floats
    model_server.script(
        answer(
            sql(
                "SELECT region, order_count * 2 AS doubled, revenue / 2 AS half FROM q1 "
                "WHERE first_order >= DATE '2024-02-01' AND first_order < '2024-03-01'"
            )
        )
    )
    filtered = extract(model_server, agent_run(BY_REGION), columns=("region", "doubled", "half"))
    [[region, doubled, half]] = rows(filtered)
    assert (region, doubled, half) == ("south", 14, 490.125)
    assert type(doubled) is int and type(half) is float


def test_the_extracted_table_compares_with_the_reference(model_server):
    model_server.script(answer(sql("SELECT region, revenue FROM q1 ORDER BY revenue DESC LIMIT 1")))
    extraction = extract(model_server, agent_run(BY_REGION))
    expected = ReferenceResult(
        "top_region", "SELECT ...", ["region", "revenue"], [["north", 1250.5]]
    )
    assert compare_results(extraction.frame, expected.to_frame()).message == "match"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("SELECT * FROM read_csv('{csv}')", "Permission Error"),
        ("SELECT * FROM '{csv}'", "Permission Error"),
        ("ATTACH '{warehouse}' AS warehouse", "ATTACH is not allowed"),
        ("SELECT * FROM orders", "Table with name orders does not exist"),
        ("COPY q1 TO '{csv}'", "COPY is not allowed"),
    ],
    ids=["read_csv", "file-scan", "attach", "warehouse-table", "copy"],
)
def test_the_model_query_runs_only_over_the_agents_tables(model_server, tmp_path, query, said):
    warehouse = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(warehouse)) as connection:
        connection.execute("CREATE TABLE orders AS SELECT 1 AS id, 99.0 AS amount")
    csv = tmp_path / "secret.csv"
    csv.write_text("region,revenue\nnorth,1\n")
    bad = query.format(csv=csv, warehouse=warehouse)
    model_server.script(answer(sql(bad)), answer(sql(bad)))
    extraction = extract(model_server, agent_run(BY_REGION))

    assert extraction.status == "error" and extraction.frame is None
    assert extraction.message.startswith("the extraction query failed twice: ")
    assert said in extraction.message
    # the repair request carried the error back to the model
    repair = model_server.requests[1]
    assert repair.messages[-2] == {"role": "assistant", "content": sql(bad)}
    assert last_user_text(repair).startswith("That query failed:\n")
    assert said in last_user_text(repair)


def test_one_repair_attempt_with_the_error_text(model_server):
    model_server.script(
        answer(sql("SELECT region, total_revenue FROM q1")),
        answer(sql("SELECT region, revenue FROM q1 WHERE order_count > 5")),
    )
    extraction = extract(model_server, agent_run(BY_REGION))

    assert extraction.status == "ok"
    assert rows(extraction) == [["north", 1250.5], ["south", 980.25]]
    assert extraction.query == "SELECT region, revenue FROM q1 WHERE order_count > 5"
    first, repair = model_server.requests
    assert repair.messages[: len(first.messages)] == first.messages
    assert 'Referenced column "total_revenue" not found' in last_user_text(repair)
    assert last_user_text(repair).endswith("Reply with a corrected query.")


def test_no_answer_from_the_model_fails_the_data_check(model_server):
    model_server.script(answer("NO_ANSWER"))
    extraction = extract(model_server, agent_run(BY_REGION))
    assert extraction.status == "no_answer" and extraction.frame is None

    case = Case(
        "top_region",
        Path("top_region.yml"),
        "top_region.yml",
        (Message("user", "Which region has the most revenue?"),),
        sql="SELECT 'north' AS region, 1250.5 AS revenue",
    )
    reference = ReferenceResult(case.name, case.sql, ["region", "revenue"], [["north", 1250.5]])
    model_server.script(answer("NO_ANSWER"))

    async def grade():
        async with open_chat_model(model_server) as model:
            return await Grader(judge_model=model).check_data(case, agent_run(BY_REGION), reference)

    check = asyncio.run(grade())
    assert check.status is GradeStatus.FAILED
    assert check.message == "no answer data: the agent's query results hold no answer"


def test_a_run_without_successful_queries_has_no_answer_and_needs_no_model(model_server):
    extraction = extract(model_server, agent_run(FAILED))
    assert extraction.status == "no_answer"
    assert extraction.message == "the agent ran no successful query"
    assert model_server.requests == []


def test_an_extraction_model_that_is_down_is_an_error_not_a_failure(model_server):
    model_server.set_script(repeat(error(502, "bad gateway")))
    extraction = extract(model_server, agent_run(BY_REGION))
    assert extraction.status == "error"
    assert extraction.message.startswith("extraction model unavailable: openai:gpt-4.1")
    no_model = asyncio.run(extract_answer(agent_run(BY_REGION), ["region"], model=None))
    assert no_model.status == "error" and "judge_model" in no_model.message


def test_an_extraction_query_cut_by_max_tokens_is_an_error_not_an_answer(model_server):
    # Cut before its WHERE clause, the query would still run and give a wrong table.
    model_server.set_script(repeat(answer(sql("SELECT region, revenue FROM q1"), cut=True)))
    extraction = extract(model_server, agent_run(BY_REGION))
    assert extraction.status == "error" and extraction.frame is None
    assert "the model reached max_tokens (1,024) and its reply was cut" in extraction.message
    assert len(model_server.requests) == 1


def test_an_external_agents_answer_is_used_as_is_without_a_model_call(model_server):
    given = {"columns": ["region", "revenue"], "rows": [["north", 1250.5]]}
    extraction = extract(model_server, agent_run(BY_REGION, answer=given))

    assert extraction.status == "ok" and extraction.source == "answer"
    assert list(extraction.frame.columns) == ["region", "revenue"]
    assert rows(extraction) == [["north", 1250.5]]
    assert model_server.requests == []
    # the answer wins over last_query too
    assert asyncio.run(
        extract_answer(agent_run(BY_REGION, answer=given), ["region"], strategy="last_query")
    ).source == ("answer")


def test_last_query_takes_the_last_successful_query_without_a_model(model_server):
    extraction = extract(model_server, agent_run(BY_REGION, TOTAL, FAILED), strategy="last_query")

    assert extraction.status == "ok" and extraction.source == "last_query"
    assert extraction.query == TOTAL.sql
    assert list(extraction.frame.columns) == ["total"] and rows(extraction) == [[2540.75]]
    assert model_server.requests == []
    none = asyncio.run(extract_answer(agent_run(FAILED), ["total"], strategy="last_query"))
    assert none.status == "no_answer"


def test_empty_query_results_become_typed_empty_tables(model_server):
    empty = QueryRecord(
        "q1",
        "SELECT region, revenue, first_order FROM sales WHERE false",
        ["region", "revenue", "first_order"],
        ["VARCHAR", "DECIMAL(18,2)", "DATE"],
        [],
        0,
    )
    untyped = QueryRecord("q2", "SELECT 'x' AS label WHERE false", ["label"], [], [], 0)
    model_server.script(
        answer(
            sql(
                "SELECT column_name, column_type FROM (DESCRIBE q1) UNION ALL "
                "SELECT column_name, column_type FROM (DESCRIBE q2)"
            )
        )
    )
    described = extract(model_server, agent_run(empty, untyped))
    assert rows(described) == [
        ["region", "VARCHAR"],
        ["revenue", "DECIMAL(18,2)"],
        ["first_order", "DATE"],
        ["label", "VARCHAR"],
    ]
    # typed, so the model's filters bind, and the empty answer compares with an empty reference
    model_server.script(
        answer(
            sql(
                "SELECT region, revenue FROM q1 WHERE revenue > 100 AND first_order > DATE '2024-01-01'"
            )
        )
    )
    filtered = extract(model_server, agent_run(empty))
    assert filtered.status == "ok" and rows(filtered) == []
    expected = ReferenceResult("t", "SELECT ...", ["region", "revenue"], [])
    assert compare_results(filtered.frame, expected.to_frame()).passed


def test_duplicate_column_names_survive_as_distinct_columns(model_server):
    twice = QueryRecord(
        "q1",
        "SELECT r.region, a.revenue, b.revenue, x.revenue_1 FROM ...",
        ["region", "revenue", "revenue", "revenue_1"],
        [],
        [["north", 1250.5, 1100.0, 7.0]],
        1,
    )
    model_server.script(answer(sql("SELECT region, revenue_2 AS revenue FROM q1")))
    extraction = extract(model_server, agent_run(twice))

    assert rows(extraction) == [["north", 1100.0]]
    prompt = model_server.requests[0].messages[1]["content"]
    assert "columns: region, revenue, revenue_2, revenue_1" in prompt
    # last_query keeps both same-named columns too, side by side
    kept = asyncio.run(extract_answer(agent_run(twice), ["revenue"], strategy="last_query"))
    assert list(kept.frame.columns) == ["region", "revenue", "revenue", "revenue_1"]
    assert rows(kept) == [["north", 1250.5, 1100.0, 7.0]]


def test_queries_with_the_same_id_each_get_a_table(model_server):
    # an external agent chooses its own ids, and may repeat one
    first = QueryRecord("q1", "SELECT 1 AS n", ["n"], [], [[1]], 1)
    again = QueryRecord("q1", "SELECT 2 AS n", ["n"], [], [[2]], 1)
    quoted = QueryRecord("step 2", 'SELECT 3 AS "a""b" WHERE false', ['a"b'], ["INTEGER"], [], 0)
    model_server.script(answer(sql("SELECT q1.n + q1_1.n AS n FROM q1, q1_1")))
    extraction = extract(model_server, agent_run(first, again, quoted), columns=("n",))

    assert rows(extraction) == [[3]]
    prompt = model_server.requests[0].messages[1]["content"]
    assert "Table q1 (1 rows" in prompt and "Table q1_1 (1 rows" in prompt
    assert "Table step_2 (0 rows" in prompt


def test_an_extraction_query_that_fails_is_kept_like_one_that_works(model_server):
    """The model's answer to these inputs, whether its query runs or not: an unchanged
    regrade asks it nothing (`--rejudge` would)."""
    cache = MemoryCache()

    def extract_cached() -> Extraction:
        async def go() -> Extraction:
            async with open_chat_model(model_server) as model:
                cached = CachedChatModel(model, cache)
                return await extract_answer(
                    agent_run(BY_REGION), ["region", "revenue"], model=cached
                )

        return asyncio.run(go())

    model_server.script(*[answer(sql("SELECT region, total_revenue FROM q1"))] * 2)
    failed = extract_cached()
    assert failed.status == "error" and not failed.retry
    assert len(cache) == 2  # the query and its repair, both kept
    assert extract_cached() == failed and len(model_server.requests) == 2

    cache = MemoryCache()  # a fresh cache (as --rejudge would): a working query, kept too
    model_server.script(answer(sql("SELECT region, revenue FROM q1 WHERE order_count > 5")))
    fixed = extract_cached()
    assert fixed.status == "ok" and fixed.model == "openai:gpt-4.1"
    assert len(cache) == 1 and len(model_server.requests) == 3
    assert rows(extract_cached()) == [["north", 1250.5], ["south", 980.25]]
    assert len(model_server.requests) == 3  # answered from the cache

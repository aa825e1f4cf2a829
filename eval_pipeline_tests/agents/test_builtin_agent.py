"""The built-in agent end to end: its tool loop over a real DuckDB warehouse, against real
OpenAI and Anthropic wire servers, and the run record it leaves behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipeline.agents import AgentLimits, AgentRun, RunStatus, execute_run
from eval_pipeline.sandbox import SandboxLimits
from eval_pipeline.suite import Suite, load_suite
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    Tokens,
    answer,
    call,
    exchanges,
    execute_sql,
    offered_tools,
    repeat,
    system_text,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import (
    AMOUNT_DOC,
    CUSTOMERS_DOC,
    ORDERS,
    ORDERS_DOC,
    RULES,
    SHIPPED_REVENUE,
    open_factory,
    request_for,
    write_suite,
)

PRICED = "priced-model"  # has configured costs in the suite below
PRICES = {"input_no_cache": 2.0, "input_cache_read": 0.5, "output": 8.0}
REVENUE_SQL = "SELECT sum(amount_usd) AS revenue FROM orders WHERE status = 'shipped'"


@pytest.fixture(params=["openai", "anthropic"])
def server(request) -> ScriptedServer:
    """Each test runs against both providers' wire protocols."""
    return request.getfixturevalue(f"{request.param}_server")


@pytest.fixture
def suite(tmp_path: Path, server: ScriptedServer) -> Suite:
    root = write_suite(
        tmp_path / "suite",
        cases={
            "revenue": "What is our revenue?",
            "target": {
                "prompt": "Did we hit the target?",
                "assertions": [{"type": "tool_call", "tool": "clarification"}],
            },
        },
        providers=[
            {
                "provider": server.protocol,
                "base_url": server.base_url,
                "timeout_s": 5,
                "models": [{"id": PRICED, "costs": PRICES}],
            }
        ],
    )
    return load_suite(root)


def run_case(
    suite: Suite,
    model: str,
    case: str = "revenue",
    *,
    limits: AgentLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
) -> AgentRun:
    """One run of `case` by the built-in agent on `model`, as the runner makes it."""

    async def go() -> AgentRun:
        async with open_factory(suite, limits=limits, sandbox_limits=sandbox_limits) as factory:
            agent = factory.agent(model)
            request = request_for(suite.case(case), model, context=factory.context)
            return await execute_run(request, agent)

    return asyncio.run(go())


# ---- reading the wire -----------------------------------------------------------------------


def arguments(raw: Any) -> Any:
    """Tool-call arguments as the model sent them (OpenAI: JSON text; Anthropic: an object)."""
    return json.loads(raw) if isinstance(raw, str) else raw


def warehouse_orders(suite: Suite) -> int:
    with duckdb.connect(str(suite.config.warehouse.path), read_only=True) as connection:
        return connection.execute("SELECT count(*) FROM orders").fetchone()[0]


# ---- the loop ---------------------------------------------------------------------------------


def test_full_tool_loop_threads_each_result_back_to_its_call(server, suite):
    server.script(
        tool_calls(call("list_tables")),
        tool_calls(call("describe_table", table_name="orders")),
        tool_calls(execute_sql(REVENUE_SQL)),
        answer(f"Revenue is {SHIPPED_REVENUE:.0f} USD."),
    )
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.COMPLETED, run.error
    assert run.final_text == f"Revenue is {SHIPPED_REVENUE:.0f} USD."
    assert run.turns == 4 and len(server.requests) == 4
    # Each request carries every earlier call with its result, under the id the server gave.
    for turn, request in enumerate(server.requests):
        assert len(exchanges(request, server.protocol)) == turn
    (listed, described, queried) = exchanges(server.last, server.protocol)
    assert listed[1] == "list_tables" and f"- orders: {ORDERS_DOC}" in listed[3]
    assert described[1] == "describe_table"
    assert arguments(described[2]) == {"table_name": "orders"}
    assert f"amount_usd (DECIMAL(10,2)) — {AMOUNT_DOC}" in described[3]
    assert queried[1] == "execute_sql" and arguments(queried[2]) == {"sql_query": REVENUE_SQL}
    assert queried[3] == f"revenue\n{SHIPPED_REVENUE}\n(1 row)"


def test_parallel_tool_calls_in_one_response_each_get_their_result(server, suite):
    server.script(
        tool_calls(
            call("describe_table", table_name="customers"),
            execute_sql("SELECT count(*) AS n FROM customers"),
        ),
        answer("4 customers."),
    )
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.COMPLETED and run.turns == 2
    described, counted = exchanges(server.last, server.protocol)
    assert described[3].startswith(f"Table customers: {CUSTOMERS_DOC}")
    assert counted[3] == "n\n4\n(1 row)"
    if server.protocol == "anthropic":
        # Both results go in the one user turn that follows the assistant's tool_use turn.
        assert [m["role"] for m in server.last.messages] == ["user", "assistant", "user"]
    assert [c.name for c in run.tool_calls] == ["describe_table", "execute_sql"]
    assert [q.rows for q in run.queries] == [[[4]]]


def test_invalid_json_arguments_are_reported_to_the_model_and_the_loop_goes_on(server, suite):
    broken = '{"sql_query": "SELECT 1"'
    server.script(tool_calls(call("execute_sql", broken)), answer("Sorry, here it is: 1."))
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.COMPLETED and run.final_text == "Sorry, here it is: 1."
    ((_, name, _, told),) = exchanges(server.last, server.protocol)
    assert name == "execute_sql"
    assert "arguments of execute_sql were not a valid JSON object" in told
    assert "Call the tool again with JSON arguments" in told
    (recorded,) = run.tool_calls
    assert recorded.arguments is None and "SELECT 1" in recorded.raw_arguments
    assert recorded.error == told
    assert run.queries == []  # nothing ran


@pytest.mark.parametrize("tool", ["drop_database", "clarification"])
def test_an_unknown_tool_is_reported_to_the_model(server, suite, tool):
    # `clarification` is unknown too in test mode, for a case that does not expect it.
    server.script(tool_calls(call(tool, question="Which one?")), answer("Revenue is 540."))
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.COMPLETED and run.final_text == "Revenue is 540."
    ((_, _, _, told),) = exchanges(server.last, server.protocol)
    assert told == (
        f"Error: unknown tool {tool!r}. Available tools: describe_table, execute_sql, list_tables."
    )
    assert run.tool_calls[0].error == told


def test_a_sandbox_error_goes_back_to_the_model_and_the_warehouse_is_untouched(server, suite):
    server.script(
        tool_calls(execute_sql("DROP TABLE orders")),
        tool_calls(execute_sql("SELECT count(*) AS n FROM orders")),
        answer("There are 12 orders."),
    )
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.COMPLETED
    dropped, counted = exchanges(server.last, server.protocol)
    assert dropped[3].startswith("Error: DROP is not allowed here. The database is read-only.")
    assert counted[3] == "n\n12\n(1 row)"
    assert run.queries[0].error is not None and run.queries[0].rows == []
    assert run.tool_calls[0].error == dropped[3]
    assert warehouse_orders(suite) == len(ORDERS)


def test_an_endless_tool_loop_ends_as_an_error_naming_the_turn_limit(server, suite):
    server.set_script(repeat(tool_calls(call("list_tables"))))
    run = run_case(suite, f"{server.protocol}:{PRICED}", limits=AgentLimits(max_turns=3))

    assert run.status is RunStatus.ERROR
    assert run.error == "the agent was still calling tools after 3 turns (limit 3)"
    assert len(server.requests) == 3
    # What happened is kept for the person who debugs the loop.
    assert run.turns == 3 and [c.name for c in run.tool_calls] == ["list_tables"] * 3
    assert run.usage.total_tokens == 3 * 120


def test_the_token_limit_ends_a_run_that_keeps_going(server, suite):
    server.set_script(repeat(tool_calls(call("list_tables"), tokens=Tokens(100, 50))))
    run = run_case(suite, f"{server.protocol}:{PRICED}", limits=AgentLimits(max_total_tokens=250))

    assert run.status is RunStatus.ERROR
    assert run.error == "the agent used 300 tokens without answering (limit 250)"
    assert len(server.requests) == 2


# ---- replies cut by max_tokens ------------------------------------------------------------------


def test_a_final_reply_cut_by_max_tokens_is_an_error_run_saying_how_to_raise_it(server, suite):
    server.script(
        tool_calls(execute_sql(REVENUE_SQL)),
        answer("Shipped revenue is 5", cut=True, tokens=Tokens(100, 4096)),
    )
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.ERROR and run.final_text == ""
    assert run.error.startswith(
        f"{server.protocol}:{PRICED}: the model reached max_tokens (4,096) and its reply was cut"
    )
    assert "Raise max_tokens for this model" in run.error and "eval_config.yaml" in run.error
    assert len(server.requests) == 2  # a cut reply is not retried: it would be cut again
    # The cut reply is kept for whoever debugs the run, and its tokens are counted.
    assert run.messages[-1] == {"role": "assistant", "content": "Shipped revenue is 5"}
    assert run.turns == 2 and run.usage.output_tokens == 20 + 4096


def test_a_tool_call_cut_by_max_tokens_is_an_error_run_not_a_loop_of_retries(server, suite):
    cut_arguments = '{"sql_query": "SELECT sum(amount_usd) AS revenue FROM orders WHERE sta'
    server.set_script(repeat(tool_calls(call("execute_sql", cut_arguments), cut=True)))
    run = run_case(suite, f"{server.protocol}:{PRICED}")

    assert run.status is RunStatus.ERROR
    assert "the arguments of its execute_sql call were cut" in run.error
    assert "Raise max_tokens" in run.error
    assert len(server.requests) == 1
    assert run.tool_calls == [] and run.queries == []  # the cut call never ran


def test_max_tokens_is_set_per_provider_and_per_model_and_the_model_wins(tmp_path, server, suite):
    limited = load_suite(
        write_suite(
            tmp_path / "limited",
            cases={"revenue": "What is our revenue?"},
            providers=[
                {
                    "provider": server.protocol,
                    "base_url": server.base_url,
                    "timeout_s": 5,
                    "max_tokens": 1500,
                    "models": [{"id": "small", "max_tokens": 300}, "big"],
                }
            ],
        )
    )
    server.set_script(repeat(answer("Revenue is 540.")))
    sent = {}
    for model in ("small", "big", "other"):
        assert run_case(limited, f"{server.protocol}:{model}").status is RunStatus.COMPLETED
        sent[model] = server.last.json["max_tokens"]
    assert run_case(suite, f"{server.protocol}:{PRICED}").status is RunStatus.COMPLETED
    sent["unconfigured"] = server.last.json["max_tokens"]
    assert sent == {"small": 300, "big": 1500, "other": 1500, "unconfigured": 4096}

    server.set_script(repeat(answer("Revenue is", cut=True)))
    run = run_case(limited, f"{server.protocol}:small")
    assert run.status is RunStatus.ERROR and "max_tokens (300)" in run.error


# ---- clarification and the system prompt -------------------------------------------------------


def test_clarification_is_offered_only_to_a_case_that_asserts_it(server, suite):
    server.script(
        answer("Revenue is 540."),
        tool_calls(call("clarification", question="Which target do you mean?")),
    )
    plain = run_case(suite, f"{server.protocol}:{PRICED}", "revenue")
    asking = run_case(suite, f"{server.protocol}:{PRICED}", "target")

    first, second = server.requests
    assert offered_tools(first, server.protocol) == ["list_tables", "describe_table", "execute_sql"]
    assert "You cannot ask the user follow-up questions" in system_text(first, server.protocol)
    assert plain.final_text == "Revenue is 540."
    assert offered_tools(second, server.protocol)[-1] == "clarification"
    # Asking ends the run: the question is the reply, and the model is not called again.
    assert asking.status is RunStatus.COMPLETED
    assert asking.final_text == "Which target do you mean?"
    assert len(server.requests) == 2 and asking.turns == 1
    assert asking.tool_calls[0].result == {"question": "Which target do you mean?"}


def test_system_prompt_holds_the_context_files_and_the_documented_tables(server, suite):
    server.script(answer("Hello."))
    run_case(suite, f"{server.protocol}:{PRICED}")

    prompt = system_text(server.last, server.protocol)
    assert f"## RULES.md\n{RULES.strip()}" in prompt
    assert f"- customers: {CUSTOMERS_DOC}\n- orders: {ORDERS_DOC}" in prompt


def test_tables_without_dbt_docs_are_listed_as_undocumented(tmp_path, server):
    root = write_suite(
        tmp_path / "plain",
        cases={"q": "How many orders?"},
        providers=[{"provider": server.protocol, "base_url": server.base_url}],
        dbt=False,
    )
    server.script(answer("Hello."))
    run_case(load_suite(root), f"{server.protocol}:{PRICED}", "q")

    prompt = system_text(server.last, server.protocol)
    assert "- customers: (no description)\n- orders: (no description)" in prompt


# ---- the run record ------------------------------------------------------------------------------


def test_the_run_record_keeps_calls_queries_results_usage_and_cost(server, suite):
    every_order = "SELECT order_id, amount_usd FROM orders ORDER BY order_id"
    customers = "SELECT customer_id, name FROM customers ORDER BY customer_id"
    tokens = Tokens(input=1000, output=50, cached=400)
    server.script(
        tool_calls(execute_sql(every_order), execute_sql(customers), tokens=tokens),
        answer("Done.", tokens=tokens),
    )
    limits = SandboxLimits(store_max_rows=5, model_max_rows=2)
    run = run_case(suite, f"{server.protocol}:{PRICED}", sandbox_limits=limits)

    assert run.status is RunStatus.COMPLETED and run.final_text == "Done."
    assert [m["role"] for m in run.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert run.messages[1]["content"] == "What is our revenue?"
    # Every tool call, with its arguments, a summary of its result and how long it took.
    assert [(c.name, c.arguments) for c in run.tool_calls] == [
        ("execute_sql", {"sql_query": every_order}),
        ("execute_sql", {"sql_query": customers}),
    ]
    assert run.tool_calls[0].result["query_id"] == "q1"
    assert run.tool_calls[0].result["columns"] == ["order_id", "amount_usd"]
    assert all(c.duration_ms > 0 for c in run.tool_calls)
    # The model saw 2 rows of each; the record keeps up to the store cap of 5.
    too_many, few = run.queries
    assert too_many.rows == [[o[0], o[3]] for o in ORDERS[:5]]
    assert (too_many.truncated, too_many.row_cap, too_many.row_count) == (True, 5, 5)
    assert few.rows == [[1, "Ada"], [2, "Bo"], [3, "Cy"], [4, "Di"]]
    assert (few.truncated, few.row_cap, few.row_count) == (False, 5, 4)
    assert few.column_types == ["INTEGER", "VARCHAR"]
    shown = [e[3] for e in exchanges(server.last, server.protocol)]
    assert shown[0].endswith(
        "(showing 2 of more than 5 rows; aggregate, filter or add LIMIT to get the rows that matter)"
    )
    assert shown[1] == "customer_id,name\n1,Ada\n2,Bo\n(showing 2 of 4 rows)"
    # Tokens of both completions, cached input included, priced at the configured costs.
    assert (run.usage.input_tokens, run.usage.cached_input_tokens, run.usage.output_tokens) == (
        2000,
        800,
        100,
    )
    assert run.cost_usd == pytest.approx((1200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)
    # The record is what the store keeps: it must survive JSON.
    assert json.loads(json.dumps(run.to_dict()))["queries"][1]["rows"][3] == [4, "Di"]


def test_a_model_without_a_price_has_no_cost_rather_than_zero(server, suite):
    server.script(answer("Revenue is 540.", tokens=Tokens(500, 40)))
    run = run_case(suite, f"{server.protocol}:mystery-model")

    assert run.status is RunStatus.COMPLETED
    assert run.usage.total_tokens == 540
    assert run.cost_usd is None


# ---- a nao project's context ------------------------------------------------------------------


def test_a_nao_projects_rules_and_synced_docs_reach_the_agent(tmp_path, openai_server, monkeypatch):
    from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, write_nao_project

    project = write_nao_project(tmp_path / "shop", base_url=openai_server.base_url)
    (project / "RULES.md").write_text("Revenue is the sum of amount, in EUR.\n")
    # Where `nao sync` puts a table's docs: one folder per database, schema and table.
    synced = project / "databases" / "type=duckdb" / "database=shop" / "schema=main"
    (synced / "table=orders").mkdir(parents=True)
    (synced / "table=orders" / "columns.md").write_text("# orders\n- amount: the order total\n")
    (synced / "table=customers").mkdir()
    (synced / "table=customers" / "columns.md").write_text("# customers\n- name\n")
    monkeypatch.setenv(KEY_VARIABLE, "sk-test")
    openai_server.script(tool_calls(call("describe_table", table_name="orders")), answer("Done."))

    run_case(load_suite(project), "vllm:qwen3", "total_revenue")

    first = openai_server.requests[0]
    assert "## RULES.md\nRevenue is the sum of amount, in EUR." in system_text(first, "openai")
    ((_, tool, _, described),) = exchanges(openai_server.last, "openai")
    assert tool == "describe_table" and "amount (DOUBLE)" in described
    label = "databases/type=duckdb/database=shop/schema=main/table=orders/columns.md"
    assert f"## {label}\n# orders\n- amount: the order total" in described
    assert "customers" not in described  # another table's docs stay with that table

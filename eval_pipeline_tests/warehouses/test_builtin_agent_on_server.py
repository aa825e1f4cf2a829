"""The built-in agent on a PostgreSQL warehouse: told the dialect and the schema, its SQL sandboxed."""

from __future__ import annotations

import asyncio

import yaml

from eval_pipeline.agents import RunStatus, execute_run
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    exchanges,
    execute_sql,
    offered_tools,
    system_text,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import open_factory, request_for, write_suite


def test_the_builtin_agent_queries_postgres_and_gets_refusals_as_tool_errors(
    tmp_path, postgres, monkeypatch
):
    monkeypatch.setenv("FINANCE_PG_URL", postgres.url)
    with ScriptedServer("openai") as server:
        root = write_suite(
            tmp_path / "suite",
            cases={"count": "How many orders are there?"},
            providers=[{"provider": "openai", "base_url": server.base_url}],
            dbt=False,
        )
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        del config["warehouse"]
        config["databases"] = [
            {"name": "finance", "type": "postgres", "url": "{{ env('FINANCE_PG_URL') }}"}
        ]
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config))
        suite = load_suite(root)
        server.script(
            tool_calls(execute_sql("COPY orders TO PROGRAM 'id'")),
            tool_calls(execute_sql("SELECT count(*) AS n FROM orders")),
            answer("There are 5 orders."),
        )

        async def go():
            async with open_factory(suite) as factory:
                agent = factory.agent("openai:gpt-4.1")
                request = request_for(
                    suite.case("count"), "openai:gpt-4.1", context=factory.context
                )
                return await execute_run(request, agent)

        run = asyncio.run(go())
        assert run.status is RunStatus.COMPLETED, run.error
        last = server.requests[-1]
        prompt = system_text(last, "openai")
        assert "questions about a PostgreSQL warehouse" in prompt
        assert "- customers: One row per customer" in prompt  # the table comment
        tools = {t["function"]["name"]: t for t in last.json["tools"]}
        assert "PostgreSQL SQL query" in tools["execute_sql"]["function"]["description"]
        assert offered_tools(last, "openai") == ["list_tables", "describe_table", "execute_sql"]
        results = [result for _, _, _, result in exchanges(last, "openai")]
        assert "COPY is not allowed here" in results[0]
        assert results[1].startswith("n\n5")
    assert postgres.password not in str(run)


def test_in_a_suite_of_two_databases_each_test_runs_on_the_one_it_names(
    tmp_path, postgres, monkeypatch
):
    monkeypatch.setenv("FINANCE_PG_URL", postgres.url)
    with ScriptedServer("openai") as server:
        root = write_suite(
            tmp_path / "suite",
            cases={
                "shop_orders": "How many orders in the shop?",
                "finance_orders": {"prompt": "How many orders?", "database": "finance"},
            },
            providers=[{"provider": "openai", "base_url": server.base_url}],
        )
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        shop = {"name": "shop", "type": "duckdb", **config.pop("warehouse")}
        finance = {"name": "finance", "type": "postgres", "url": "{{ env('FINANCE_PG_URL') }}"}
        config["databases"] = [shop, finance]
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config))
        suite = load_suite(root)

        async def go(case: str):
            server.script(
                tool_calls(execute_sql("SELECT count(*) AS n FROM orders")), answer("Counted.")
            )
            async with open_factory(suite) as factory:
                agent = factory.agent("openai:gpt-4.1")
                request = request_for(suite.case(case), "openai:gpt-4.1", context=factory.context)
                run = await execute_run(request, agent)
            assert run.status is RunStatus.COMPLETED, run.error
            last = server.requests[-1]
            return system_text(last, "openai"), exchanges(last, "openai")[0][3]

        shop_prompt, shop_result = asyncio.run(go("shop_orders"))
        finance_prompt, finance_result = asyncio.run(go("finance_orders"))
    assert "a DuckDB warehouse" in shop_prompt and shop_result.startswith("n\n12")
    assert "a PostgreSQL warehouse" in finance_prompt and finance_result.startswith("n\n5")

"""The built-in agent's tools as docs/writing-tests.md documents them: the names and arguments
the page gives are the ones the model is offered, its example test passes through the real CLI
when the model uses them as described, and a DuckDB warehouse's comments reach the model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
import yaml

from eval_pipeline.agents import BUILTIN_TOOLS
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, by_turn, call, tool_calls
from eval_pipeline_tests.agents.tiny_suite import SHIPPED_REVENUE, write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY

PAGE = Path(__file__).parents[2] / "docs" / "writing-tests.md"
_SECTION = PAGE.read_text(encoding="utf-8").split("## The built-in agent's tools")[1]


def _documented_tools() -> dict[str, set[str]]:
    """tool → argument names, from the page's table."""
    tools = {}
    for tool, arguments in re.findall(r"^\| `(\w+)` \| ([^|]+) \|", _SECTION, re.MULTILINE):
        tools[tool] = set(re.findall(r"^`(\w+)`", arguments.strip()))
    return tools


def test_the_page_names_every_tool_and_argument_the_model_is_offered():
    offered = {spec.name: set(spec.parameters["properties"]) for spec in BUILTIN_TOOLS}
    assert _documented_tools() == offered


@pytest.mark.slow
def test_the_pages_example_passes_and_the_warehouse_comments_reach_the_model(tmp_path):
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", _SECTION, re.DOTALL).group(1))
    script = by_turn(
        tool_calls(call("describe_table", table_name="orders")),
        tool_calls(
            call(
                "execute_sql",
                sql_query="SELECT SUM(amount_usd) AS revenue FROM orders WHERE status = 'shipped'",
            )
        ),
        answer(f"Revenue is {SHIPPED_REVENUE}."),
    )
    with ScriptedServer("openai", script=script) as server:
        root = write_suite(
            tmp_path / "suite",
            cases={example.pop("name"): example},
            providers=[{"provider": "openai", "base_url": server.base_url, "api_key": "sk-x"}],
            dbt=False,  # descriptions from the warehouse's own comments
        )
        with duckdb.connect(str(root / "warehouse.duckdb")) as connection:
            connection.execute("COMMENT ON TABLE orders IS 'Every order placed, one row each'")
            connection.execute("COMMENT ON COLUMN orders.amount_usd IS 'Order total in USD'")
        result = run_cli(
            "test", "--date", DAY, "--format", "json", "--no-cache", cwd=root, env=cli_env()
        )
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = json.loads(result.stdout)["results"]
    assert run["passed"], run
    system = server.requests[0].messages[0]["content"]
    assert "- orders: Every order placed, one row each" in system
    described = next(m for m in server.requests[1].messages if m.get("role") == "tool")
    assert "- amount_usd (DECIMAL(10,2)) — Order total in USD" in described["content"]

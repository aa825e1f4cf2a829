"""A small suite on a hand-made warehouse, scripted LLM servers, and Dagster helpers.

The suite has three data cases (reference SQL over a 3-table DuckDB file, no dbt) and one
evaluator case. The agent under test is the built-in agent driven by a scripted
OpenAI-compatible server (`Analyst`); the judge is a second scripted server, so agent
requests and judge requests are counted apart.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from eval_pipeline.defs import build_definitions
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import load_config
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    repeat,
    tool_calls,
)

DAY = "2026-06-01"
NEXT_DAY = "2026-06-02"
MODELS = ("openai:gpt-a", "openai:gpt-b")
EVALUATION = ["agent_runs", "grades", "model_summaries"]

# Each case: its prompt (with a phrase the analyst recognises) and its reference SQL.
CASES = {
    "total_revenue": (
        "What is the total revenue of all orders?",
        "SELECT SUM(amount) AS revenue FROM orders",
    ),
    "orders_by_region": (
        "How many orders per region?",
        "SELECT c.region, COUNT(*) AS orders FROM orders o JOIN customers c USING (customer_id) GROUP BY c.region",
    ),
    "customer_count": (
        "How many customers do we have?",
        "SELECT COUNT(*) AS customers FROM customers",
    ),
}
EVALUATOR_CASE = "greets_the_team"
RIGHT_SQL = {name: sql for name, (_, sql) in CASES.items()}
WRONG_SQL = {
    "total_revenue": "SELECT SUM(amount) + 1 AS revenue FROM orders",
    "orders_by_region": "SELECT 'EU' AS region, 1 AS orders",
    "customer_count": "SELECT 0 AS customers",
}
PHRASES = {
    "total revenue": "total_revenue",
    "orders per region": "orders_by_region",
    "how many customers": "customer_count",
    "say hello": EVALUATOR_CASE,
}


def materialize(
    defs: dg.Definitions,
    assets: list[str],
    *,
    instance: dg.DagsterInstance,
    partition_key: str | dg.MultiPartitionKey | None = None,
    run_config: dict | None = None,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize some of the definitions' assets in this process, recorded in `instance`
    (so the runs show in the Dagster UI of that instance)."""
    keys = [dg.AssetKey.from_user_string(name) for name in assets]
    job = defs.resolve_implicit_job_def_def_for_assets(keys)
    assert job is not None, f"no job can materialize {assets}"
    return job.execute_in_process(
        instance=instance,
        partition_key=partition_key,
        asset_selection=keys,
        run_config=run_config,
        tags=tags,
        raise_on_error=False,
    )


@dataclass
class Analyst:
    """The scripted agent: for a data case, one `execute_sql` then a short answer; for the
    evaluator case, a greeting. `sql` says which query each case runs (tests change it)."""

    sql: dict[str, str] = field(default_factory=lambda: dict(RIGHT_SQL))

    def case_of(self, request: RecordedRequest) -> str:
        users = [m for m in request.messages if m.get("role") == "user"]
        text = str(users[0].get("content", "")).lower() if users else ""
        return next((case for phrase, case in PHRASES.items() if phrase in text), "unknown")

    def __call__(self, request: RecordedRequest, _index: int) -> Step:
        case = self.case_of(request)
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if case in self.sql and turn == 0:
            return tool_calls(execute_sql(self.sql[case]))
        return answer("Hello team!" if case == EVALUATOR_CASE else "Here is the figure.")


def agent_requests(server: ScriptedServer, model: str | None = None) -> int:
    """Completions the agent server answered (for one model id's `model` field, if given)."""
    wanted = None if model is None else model.split(":", 1)[1]
    return sum(1 for r in server.requests if wanted is None or r.json.get("model") == wanted)


def make_warehouse(path: Path) -> None:
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            textwrap.dedent(
                """
                CREATE TABLE customers AS SELECT * FROM (VALUES
                    (1, 'Ada', 'EU'), (2, 'Bo', 'US'), (3, 'Cy', 'US')) t(customer_id, name, region);
                CREATE TABLE orders AS SELECT * FROM (VALUES
                    (10, 1, 120.5), (11, 2, 80.0), (12, 2, 42.25), (13, 3, 10.0)) t(order_id, customer_id, amount);
                CREATE TABLE products AS SELECT * FROM (VALUES (1, 'mug'), (2, 'tee')) t(product_id, title);
                """
            )
        )


@dataclass
class SmallSuite:
    """A suite folder on disk plus its servers; `config` is what eval_config.yaml holds."""

    root: Path
    agent: ScriptedServer
    judge: ScriptedServer
    analyst: Analyst
    models: tuple[str, ...] = MODELS
    config: dict = field(default_factory=dict)

    @property
    def layout(self) -> StateFolder:
        return StateFolder.of(load_config(self.root))

    @property
    def results(self) -> Path:
        return self.layout.database

    def write_config(self, **test_options: object) -> None:
        """(Re)write eval_config.yaml, with `test_options` merged into its `test:` block."""
        self.config["test"].update(test_options)
        (self.root / "eval_config.yaml").write_text(yaml.safe_dump(self.config, sort_keys=False))

    def case_file(self, name: str) -> Path:
        return self.root / "cases" / f"{name}.yml"

    def edit_case(self, name: str, **changes: object) -> None:
        path = self.case_file(name)
        data = yaml.safe_load(path.read_text())
        data.update(changes)
        path.write_text(yaml.safe_dump(data, sort_keys=False))

    def definitions(self) -> dg.Definitions:
        return build_definitions(self.root)


def write_suite(root: Path, agent: ScriptedServer, judge: ScriptedServer) -> dict:
    (root / "cases").mkdir(parents=True)
    make_warehouse(root / "warehouse.duckdb")
    (root / "RULES.md").write_text("# Rules\nRevenue is the sum of order amounts.\n")
    for name, (prompt, sql) in CASES.items():
        (root / "cases" / f"{name}.yml").write_text(
            yaml.safe_dump({"name": name, "prompt": prompt, "sql": sql}, sort_keys=False)
        )
    (root / "cases" / f"{EVALUATOR_CASE}.yml").write_text(
        yaml.safe_dump(
            {
                "prompt": "Say hello to the analyst team.",
                "evaluators": [{"name": "friendly", "criteria": "Greets the team"}],
            },
            sort_keys=False,
        )
    )
    config = {
        "test": {
            "models": list(MODELS),
            "threads": 4,
            "k": 1,
            "judge_model": "judge:gpt-judge",
            "extraction": "last_query",
            "schedule": "0 6 * * *",
            "start_date": "2026-05-01",  # the daily partitions hold DAY and the days around it
        },
        "warehouse": {"type": "duckdb", "path": "warehouse.duckdb"},
        "context": ["RULES.md"],
        "llm": {
            "providers": [
                {"provider": "openai", "base_url": agent.base_url, "timeout_s": 10},
                {"provider": "judge", "base_url": judge.base_url, "timeout_s": 10},
            ]
        },
    }
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return config


JUDGE_SAYS_PASSED = answer('{"passed": true, "reasoning": "It greets the team."}')


@contextmanager
def open_small_suite(root: Path) -> Iterator[SmallSuite]:
    """Write the suite into `root` (which must not exist) and run its two servers."""
    analyst = Analyst()
    with ScriptedServer("openai", script=analyst) as agent, ScriptedServer("openai") as judge:
        judge.set_script(repeat(JUDGE_SAYS_PASSED))
        config = write_suite(root, agent, judge)
        yield SmallSuite(root=root, agent=agent, judge=judge, analyst=analyst, config=config)


def seed_history_manifest(suite: SmallSuite, target: Path) -> None:
    """Start the suite's state folder with the history dbt project's parse (`target`, from the
    `history_dbt_target` fixture), as a first load leaves it: loading the definitions then
    runs no `dbt parse` (the project names no suite)."""
    shutil.copytree(target, suite.layout.history_dbt_target)


def prepare(
    suite: SmallSuite, instance: dg.DagsterInstance, *days: str, run_config: dict | None = None
) -> dg.Definitions:
    """Definitions with the suite inputs and each day's references materialized."""
    defs = suite.definitions()
    inputs = materialize(
        defs,
        ["test_cases", "agent_context", "grading_rules"],
        instance=instance,
        run_config=run_config,
    )
    assert inputs.success
    for day in days or (DAY,):
        references = materialize(
            defs, ["reference_results"], partition_key=day, instance=instance, run_config=run_config
        )
        assert references.success
    return defs


# A run config that keeps Dagster's console to warnings (for scripts; tests capture the log).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def evaluate(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    model: str,
    day: str = DAY,
    *,
    assets: list[str] | None = None,
    run_config: dict | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize one (model, day) partition of the evaluation assets; it must succeed."""
    result = materialize(
        defs,
        assets or EVALUATION,
        partition_key=model_day_key(model, day),
        instance=instance,
        run_config=run_config,
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return result


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, object]:
    """The plain values of an asset's materialization metadata in a result."""
    (event,) = result.asset_materializations_for_node(asset)
    return {key: getattr(value, "value", value) for key, value in event.metadata.items()}


def run_counts(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    """What the `agent_runs` step did: runs in the partition, executed, reused, carried over."""
    values = metadata(result, "agent_runs")
    return {key: values[key] for key in ("runs", "executed", "reused", "carried_over")}

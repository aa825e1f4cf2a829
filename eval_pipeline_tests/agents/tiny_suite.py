"""A tiny suite on disk for agent-loop tests: a DuckDB shop warehouse, dbt docs, RULES.md, cases.

Written the way a user lays out a suite (eval_config.yaml, cases/*.yml, a warehouse file),
then loaded with `load_suite`, so tests go through the same configuration path as a real run:

    root = write_suite(tmp_path / "suite", cases={"revenue": "What is the revenue?"},
                       providers=[{"provider": "openai", "base_url": server.base_url}])
    async with open_factory(load_suite(root)) as factory:
        agent = factory.agent("openai:gpt-4.1")

`by_prompt` scripts a server for many conversations at once, each by its question.
"""

from __future__ import annotations

import functools
import json
import tempfile
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import yaml

from eval_pipeline.agents import AgentFactory, AgentLimits, ProviderPool, RetryPolicy, RunRequest
from eval_pipeline.sandbox import SandboxLimits
from eval_pipeline.suite import AgentContext, Case, Suite, load_agent_context, load_suite
from eval_pipeline_tests.agents.servers import (
    FAST_RETRY,
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    by_turn,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.steps import exhausted

DAY = date(2026, 3, 2)

RULES = """\
# Business rules
Revenue counts shipped orders only; cancelled orders never count.
The fiscal year starts on 1 February.
"""

ORDERS_DOC = "One row per order placed in the shop, test orders excluded."
AMOUNT_DOC = "Order total in US dollars, tax included."
CUSTOMERS_DOC = "Customers who placed at least one order."

#: (order_id, customer_id, order_date, amount_usd, status): 12 orders, 9 shipped.
ORDERS = [
    (i, 1 + i % 4, f"2026-01-{i:02d}", 10.0 * i, "cancelled" if i % 4 == 0 else "shipped")
    for i in range(1, 13)
]
SHIPPED_REVENUE = sum(o[3] for o in ORDERS if o[4] == "shipped")


#: What a conversation gets unless a test scripts it: one query, then an answer.
ROUTINE = by_turn(tool_calls(execute_sql("SELECT count(*) AS n FROM orders")), answer("12 orders."))


def prompt_of(request: RecordedRequest) -> str:
    """The question of the conversation a provider request belongs to (its first user turn)."""
    for message in request.messages:
        if message.get("role") == "user":
            content = message["content"]
            if isinstance(content, list):  # Anthropic blocks
                return "".join(b.get("text", "") for b in content if b.get("type") == "text")
            return content
    return ""


def by_prompt(
    scripts: Mapping[str, Sequence[Step]],
    default: Callable[[RecordedRequest, int], Step] = ROUTINE,
) -> Callable[[RecordedRequest, int], Step]:
    """A server script for many conversations at once: each question listed in `scripts` gets
    its own steps, consumed in order by its requests (retries included); other questions get
    `default`."""
    lock = threading.Lock()
    used: Counter[str] = Counter()

    def choose(request: RecordedRequest, index: int) -> Step:
        prompt = prompt_of(request)
        if prompt not in scripts:
            return default(request, index)
        with lock:
            n = used[prompt]
            used[prompt] += 1
        steps = scripts[prompt]
        return steps[n] if n < len(steps) else exhausted(f"{prompt!r} has {len(steps)} step(s)")

    return choose


def build_warehouse(path: Path) -> Path:
    """A small DuckDB file: `orders` (12 rows) and `customers` (4 rows).

    Built once per process and copied after that: creating a DuckDB file costs far more
    than writing its bytes, and most tests want a fresh one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_warehouse_bytes())
    return path


@functools.cache
def _warehouse_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "warehouse.duckdb"
        with duckdb.connect(str(path)) as connection:
            connection.execute(
                "CREATE TABLE orders (order_id INTEGER, customer_id INTEGER, order_date DATE, "
                "amount_usd DECIMAL(10, 2), status VARCHAR)"
            )
            connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", ORDERS)
            connection.execute(
                "CREATE TABLE customers (customer_id INTEGER, name VARCHAR, country VARCHAR)"
            )
            connection.executemany(
                "INSERT INTO customers VALUES (?, ?, ?)",
                [(1, "Ada", "FR"), (2, "Bo", "DE"), (3, "Cy", "US"), (4, "Di", "US")],
            )
        return path.read_bytes()


def write_dbt_docs(project: Path) -> Path:
    """A dbt project holding only what the agent reads: schema.yml model and column docs."""
    (project / "models").mkdir(parents=True, exist_ok=True)
    (project / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nprofile: shop\n")
    schema = {
        "version": 2,
        "models": [
            {
                "name": "orders",
                "description": ORDERS_DOC,
                "columns": [{"name": "amount_usd", "description": AMOUNT_DOC}],
            },
            {"name": "customers", "description": CUSTOMERS_DOC},
        ],
    }
    (project / "models" / "schema.yml").write_text(yaml.safe_dump(schema, sort_keys=False))
    return project


def write_case(root: Path, name: str, case: str | Mapping[str, Any]) -> Path:
    """Write `cases/<name>.yml`; a string is the prompt, a mapping the other fields too."""
    fields = {"prompt": case} if isinstance(case, str) else dict(case)
    path = root / "cases" / f"{name}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"name": name, **fields}, sort_keys=False), encoding="utf-8")
    return path


def write_suite(
    root: Path,
    *,
    cases: Mapping[str, str | Mapping[str, Any]],
    providers: Sequence[Mapping[str, Any]] = (),
    agents: Sequence[Mapping[str, Any]] = (),
    threads: int = 4,
    k: int = 1,
    judge_model: str | None = None,
    dbt: bool = True,
) -> Path:
    """A suite folder: eval_config.yaml, RULES.md, warehouse.duckdb, optional dbt docs, cases.

    Args:
        root: the suite folder to create.
        cases: test name → prompt (or the case's fields).
        providers: `llm.providers` entries, as in eval_config.yaml.
        agents: `agents` entries, as in eval_config.yaml.
        threads: `test.threads`.
        k: `test.k`.
        judge_model: `test.judge_model`.
        dbt: give the warehouse a dbt project with model descriptions.
    """
    root.mkdir(parents=True, exist_ok=True)
    build_warehouse(root / "warehouse.duckdb")
    (root / "RULES.md").write_text(RULES, encoding="utf-8")
    warehouse: dict[str, Any] = {"type": "duckdb", "path": "warehouse.duckdb"}
    if dbt:
        write_dbt_docs(root / "dbt")
        warehouse["dbt_project"] = "dbt/"
    test: dict[str, Any] = {"models": ["openai:gpt-4.1"], "threads": threads, "k": k}
    if judge_model is not None:
        test["judge_model"] = judge_model
    config: dict[str, Any] = {"test": test, "warehouse": warehouse, "context": ["RULES.md"]}
    if providers:
        config["llm"] = {"providers": [dict(p) for p in providers]}
    if agents:
        config["agents"] = [dict(a) for a in agents]
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, case in cases.items():
        write_case(root, name, case)
    return root


def requests_for(
    suite: Suite, model: str, *, k: int = 1, context: AgentContext
) -> list[RunRequest]:
    """One request per case and attempt, for `execute_runs`."""
    return [
        RunRequest(case, model, attempt, DAY, context.hash)
        for case in suite.cases
        for attempt in range(k)
    ]


def request_for(case: Case, model: str, *, attempt: int = 0, context: AgentContext) -> RunRequest:
    return RunRequest(case, model, attempt, DAY, context.hash)


@asynccontextmanager
async def open_factory(
    suite: Suite,
    *,
    policy: RetryPolicy = FAST_RETRY,
    recording: bool = False,
    limits: AgentLimits | None = None,
    sandbox_limits: SandboxLimits | None = None,
    concurrency: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[AgentFactory]:
    """The agent factory of a run, as `run_agents` builds it, with a fast retry policy.

    `environ` None reads keys from `os.environ`, as a real run does.
    """
    async with ProviderPool(
        suite.config, concurrency=concurrency, policy=policy, environ=environ
    ) as pool:
        factory = AgentFactory(
            suite.config,
            pool,
            context=load_agent_context(suite.config),
            recording=recording,
            limits=limits,
            sandbox_limits=sandbox_limits,
        )
        try:
            yield factory
        finally:
            factory.close()


#: Six cases with distinct questions, for suites written by `make_suite(..., cases=QUESTIONS)`.
QUESTIONS = {f"q{i}": f"What is {i} squared?" for i in range(6)}


def make_suite(tmp_path: Path, server: ScriptedServer | None = None, **options: Any) -> Suite:
    """`write_suite` in `tmp_path/suite`, its provider the server's (if any), loaded."""
    providers = []
    if server is not None:
        providers = [{"provider": server.protocol, "base_url": server.base_url, "timeout_s": 5}]
    return load_suite(write_suite(tmp_path / "suite", providers=providers, **options))


def write_recording(suite: Suite, name: str, *lines: dict[str, Any] | str) -> Path:
    """A hand-written recording: dicts become JSON lines, strings are written verbatim."""
    path = suite.root / "recordings" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path

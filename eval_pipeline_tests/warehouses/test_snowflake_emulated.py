"""Snowflake end to end on an emulator: the real `snowflake-connector-python` against fakesnow on 127.0.0.1.

The same verdict suite as PostgreSQL and MariaDB, hostile SQL from a model refused, a slow
statement stopped in the emulator itself, a huge result bounded, types as Snowflake sends
them, a privileged role refused, and a nao project naming a Snowflake database run by the
real `eval-pipeline test`. What the emulator cannot do (grants, the statement timeout,
cancellation, a refused password) the test server answers as Snowflake documents it
(`snowflake_server.py`); docs/warehouses.md says what only a real account proves.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from eval_pipeline.agents import AgentRun, RunStatus, execute_run
from eval_pipeline.grading import compare_results
from eval_pipeline.sandbox import QueryTimeout, SandboxLimits, ServerSandbox, SqlSandbox
from eval_pipeline.suite import DatabaseConfig, Templated, load_suite
from eval_pipeline.warehouses import (
    PrivilegedRole,
    StatementTimeout,
    connect,
    schema_description,
)
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    exchanges,
    execute_sql,
    system_text,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import open_factory, request_for, write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli, run_cli_subprocess
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project
from eval_pipeline_tests.warehouses.small_warehouse import load_statements
from eval_pipeline_tests.warehouses.snowflake_server import (
    ANALYST,
    OWNER,
    READER,
    WAREHOUSE,
    FakesnowUnavailable,
    SnowflakeServer,
    free_port,
    snowflake_server,
)
from eval_pipeline_tests.warehouses.test_same_verdicts import CASES, _frames

pytestmark = pytest.mark.slow

#: A read the sandbox allows that keeps the emulator busy for minutes (CPU only).
SLOW_QUERY = (
    "SELECT COUNT(*) AS n FROM TABLE(GENERATOR(ROWCOUNT => 1000000000)) AS a, "
    "TABLE(GENERATOR(ROWCOUNT => 100000)) AS b"
)
PAYLOADS = [
    "DELETE FROM orders",
    "UPDATE orders SET amount = 0",
    "CREATE TABLE eval_hostile AS SELECT * FROM orders",
    "ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = 0",
    "USE ROLE ACCOUNTADMIN",
    "CALL eval_procedure()",
    "EXECUTE IMMEDIATE 'DELETE FROM orders'",
    "BEGIN DELETE FROM orders; END",
    "COPY INTO @eval_stage FROM orders",
    "PUT file:///etc/passwd @eval_stage",
    "SELECT $1 FROM @eval_stage",
    "SELECT SYSTEM$WAIT(30)",
    "SELECT SYSTEM$CANCEL_QUERY('01a2')",
    "SELECT eval_external_function(amount) FROM orders",
    "SELECT 1 AS a; DELETE FROM orders",
    "SELECT 1 AS a --\u3000comment\n, SYSTEM$WAIT(30)",
]
REFUSALS = (
    "only allowed inside",
    "is not allowed",
    "are not allowed",
    "could not be parsed",
    "one SQL statement",
)


@pytest.fixture(scope="module")
def snowflake() -> Iterator[SnowflakeServer]:
    """The emulator holding the small warehouse in SHOP.PUBLIC, loaded by its owner."""
    pytest.importorskip("snowflake.connector", reason="pip install 'eval-pipeline[snowflake]'")
    try:
        with snowflake_server() as server:
            connection = server.connect(OWNER)
            cursor = connection.cursor()
            for statement in load_statements("duckdb"):
                cursor.execute(statement)
            connection.close()
            yield server
    except FakesnowUnavailable as error:
        pytest.skip(f"fakesnow cannot be installed here: {error}")


def database(server: SnowflakeServer, user: str = READER, **options) -> DatabaseConfig:
    url = Templated(server.url(user), secret="url_password")
    return DatabaseConfig("shop", "snowflake", url=url, **options)


def contents(server: SnowflakeServer) -> tuple:
    """What a write would change: the tables, and the orders' count and total."""
    connection = server.connect(OWNER)
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT COUNT(*), SUM(amount) FROM orders")
        orders = tuple(cursor.fetchone())
        cursor.execute("SHOW TABLES")
        return orders, sorted(row[1] for row in cursor.fetchall())
    finally:
        connection.close()


def test_the_verdict_suite_gives_duckdbs_verdicts_and_references(snowflake, duckdb_warehouse):
    pairs = [(reference, agent) for reference, agent, _ in CASES]
    with SqlSandbox.for_file(duckdb_warehouse) as sandbox:
        on_duckdb = _frames(sandbox, pairs)
    with ServerSandbox(database(snowflake)) as sandbox:
        on_snowflake = _frames(sandbox, pairs)
    verdicts = [
        compare_results(agent, reference, ordered="ORDER BY" in sql).passed
        for (reference, agent), (sql, _, _) in zip(on_snowflake, CASES, strict=True)
    ]
    assert verdicts == [expected for _, _, expected in CASES]
    for i, ((reference, _), (duck_reference, _)) in enumerate(
        zip(on_snowflake, on_duckdb, strict=True)
    ):
        comparison = compare_results(reference, duck_reference)
        assert comparison.passed, (CASES[i][0], comparison.message)


def read(server: SnowflakeServer, sql: str) -> tuple[list[str], list[dict]]:
    with connect(database(server)) as connection:
        connection.begin_read_only(30)
        stream = connection.stream(sql)
        rows = [row for batch in stream.batches for row in batch.to_pylist()]
        connection.end()
    return stream.column_types, rows


def test_types_arrive_as_snowflake_gives_them(snowflake):
    types, rows = read(
        snowflake,
        "SELECT c.signup_date, o.ordered_at, o.paid_at, o.amount, c.is_vip, c.credit_limit, o.id "
        "FROM orders AS o JOIN customers AS c ON c.id = o.customer_id "
        "WHERE o.id IN (10, 11) ORDER BY o.id",
    )
    assert types == [
        "DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "DECIMAL(12,2)", "BOOLEAN",
        "DECIMAL(12,2)", "DECIMAL(38,0)",
    ]  # fmt: skip
    first, second = (list(row.values()) for row in rows)
    assert first == [
        dt.date(2024, 1, 5),
        dt.datetime(2024, 3, 1, 9, 30),
        dt.datetime(2024, 3, 1, 9, 31, 5, tzinfo=dt.UTC),
        Decimal("120.50"),
        True,
        Decimal("1000.00"),
        Decimal(10),
    ]
    assert second[2] is None  # a NULL TIMESTAMP_TZ is NULL, not the epoch
    types, rows = read(
        snowflake,
        "SELECT 1.5::NUMBER(10,4) AS n, PARSE_JSON('{\"a\": [1, 2]}') AS v, "
        "TO_TIMESTAMP_TZ('2024-01-01 10:00:00 +02:00') AS tz, "
        "TO_TIMESTAMP_LTZ('2024-01-01 10:00:00') AS ltz",
    )
    assert types == ["DECIMAL(10,4)", "VARCHAR", "TIMESTAMP WITH TIME ZONE",
                     "TIMESTAMP WITH TIME ZONE"]  # fmt: skip
    (row,) = rows
    assert row["N"] == Decimal("1.5000") and json.loads(row["V"]) == {"a": [1, 2]}
    # TIMESTAMP_TZ is the instant, in UTC (as DuckDB's TIMESTAMPTZ): its offset is not kept.
    assert row["TZ"] == dt.datetime(2024, 1, 1, 8, tzinfo=dt.UTC)
    assert row["LTZ"] == dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)  # the session is in UTC
    types, rows = read(
        snowflake,
        "SELECT PARSE_JSON('[1, 2]')::ARRAY AS a, PARSE_JSON('{\"k\": 1}')::OBJECT AS o, "
        "TO_TIMESTAMP_NTZ('9999-12-31 23:59:59') AS far, TO_DATE('0001-01-01') AS early, "
        "12345678901234567890123456.78::NUMBER(38,2) AS wide, 'a'::BINARY AS b, "
        "TO_TIME('10:00:01') AS t",
    )
    assert types == ["VARCHAR", "VARCHAR", "TIMESTAMP", "DATE", "DECIMAL(38,2)", "BLOB", "TIME"]
    assert rows == [
        {
            "A": "[1,2]",
            "O": '{"k":1}',
            "FAR": dt.datetime(9999, 12, 31, 23, 59, 59),  # past the nanosecond range
            "EARLY": dt.date(1, 1, 1),
            "WIDE": Decimal("12345678901234567890123456.78"),
            "B": b"a",
            "T": dt.time(10, 0, 1),
        }
    ]


def test_the_agent_is_told_the_schema_from_the_information_schema(snowflake):
    with connect(database(snowflake)) as connection:
        text = schema_description(connection)
    assert "table CUSTOMERS — One row per customer" in text
    assert "  - CREDIT_LIMIT number(12,2)" in text and "  - PAID_AT timestamp_tz" in text


def run_agent(tmp_path: Path, server: SnowflakeServer, sqls: list[str], **options) -> tuple:
    """One run of the built-in agent whose scripted model sends `sqls` as `execute_sql`
    calls; the run, the tool results the model read and the system prompt it was given."""
    with ScriptedServer("openai") as model:
        root = write_suite(
            tmp_path / "suite",
            cases={"q": "How many orders are there?"},
            providers=[{"provider": "openai", "base_url": model.base_url}],
            dbt=False,
        )
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        del config["warehouse"]
        user = options.pop("user", READER)
        config["databases"] = [
            {"name": "shop", "type": "snowflake", "url": server.url(user), **options}
        ]
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config))
        suite = load_suite(root)
        model.script(
            tool_calls(*(execute_sql(sql) for sql in sqls)),
            tool_calls(execute_sql("SELECT COUNT(*) AS n FROM orders")),
            answer("There are 5 orders."),
        )

        async def go() -> AgentRun:
            async with open_factory(suite) as factory:
                agent = factory.agent("openai:gpt-4.1")
                return await execute_run(
                    request_for(suite.case("q"), "openai:gpt-4.1", context=factory.context), agent
                )

        run = asyncio.run(go())
        last = model.requests[-1]
        results = [result for _, _, _, result in exchanges(last, "openai")]
        told = system_text(model.requests[0], "openai")
    return run, results, told


@pytest.mark.parametrize("who", ["read-only role", "owner, allow_privileged_role"])
def test_every_hostile_payload_is_refused_as_a_tool_error_and_changes_nothing(
    tmp_path, snowflake, who
):
    options = {} if who == "read-only role" else {"user": OWNER, "allow_privileged_role": True}
    before = contents(snowflake)
    run, results, told = run_agent(tmp_path, snowflake, PAYLOADS, **options)
    assert run.status is RunStatus.COMPLETED, run.error
    for sql, result in zip(PAYLOADS, results, strict=False):
        assert result.startswith("Error:"), (sql, result)
        assert any(words in result for words in REFUSALS), (sql, result)
    assert results[len(PAYLOADS)].startswith("N\n5")  # and the next query works
    assert contents(snowflake) == before
    assert before[0][0] == 5 and before[1] == ["CUSTOMERS", "ORDERS"]
    assert "Snowflake" in told and "ORDERS" in told  # the agent is told its engine and tables


def test_a_role_that_can_write_is_refused_before_any_statement_with_the_recipe(snowflake):
    with pytest.raises(PrivilegedRole) as refused:
        connect(database(snowflake, ANALYST))
    message = refused.value.message
    assert "INSERT on TABLE SHOP.PUBLIC.ORDERS (through role ANALYST)" in message
    assert "GRANT SELECT ON ALL TABLES IN SCHEMA SHOP.PUBLIC TO ROLE eval_reader" in message
    assert f"GRANT USAGE ON WAREHOUSE {WAREHOUSE} TO ROLE eval_reader" in message
    assert "allow_privileged_role: true" in message
    with pytest.raises(PrivilegedRole, match="the system role SYSADMIN"):
        connect(database(snowflake, OWNER))
    connect(database(snowflake, ANALYST, allow_privileged_role=True)).close()


def test_a_slow_statement_is_stopped_in_the_emulator_at_the_time_limit(snowflake):
    with ServerSandbox(database(snowflake), SandboxLimits(timeout_s=2)) as sandbox:
        started = time.monotonic()
        with pytest.raises(QueryTimeout, match="stopped after 2 s"):
            sandbox.execute(SLOW_QUERY)
        assert time.monotonic() - started < 6
        assert sandbox.execute("SELECT COUNT(*) AS n FROM orders").rows == [(5,)]
    # Stopped by the session's STATEMENT_TIMEOUT_IN_SECONDS (not the sandbox's backstop), in
    # DuckDB under the emulator.
    log = snowflake.log.read_text()
    assert "(timeout)" in log and "Interrupted" in log


def test_a_cancel_from_the_watchdog_stops_the_statement_on_the_server(snowflake):
    with connect(database(snowflake)) as connection:
        connection.begin_read_only(600)
        timer = threading.Timer(1.0, connection.cancel)
        timer.start()
        started = time.monotonic()
        with pytest.raises(StatementTimeout, match="000604"):
            list(connection.stream(SLOW_QUERY).batches)
        assert time.monotonic() - started < 6
        connection.end()
        assert "(cancel)" in snowflake.log.read_text()
        connection.begin_read_only(30)
        (batch,) = connection.stream("SELECT 1 AS one").batches
        assert batch.to_pylist() == [{"ONE": 1}]


def test_a_huge_result_is_kept_within_the_rows_and_bytes_bounds(snowflake):
    limits = SandboxLimits(timeout_s=60)
    with ServerSandbox(database(snowflake), limits) as sandbox:
        many = sandbox.execute(
            "SELECT SEQ4() AS i, REPEAT('x', 100) AS pad "
            "FROM TABLE(GENERATOR(ROWCOUNT => 300000)) ORDER BY i"
        )
        wide = sandbox.execute(
            "SELECT SEQ4() AS i, REPEAT('y', 1000000) AS big "
            "FROM TABLE(GENERATOR(ROWCOUNT => 20)) ORDER BY i"
        )
        heavy = sandbox.execute(
            "SELECT SEQ4() AS i, REPEAT('z', 60000) AS c "
            "FROM TABLE(GENERATOR(ROWCOUNT => 400)) ORDER BY i"
        )
    caps = limits.fetch_caps()
    assert many.truncated and len(many.rows) == caps.max_rows
    assert [row[0] for row in many.rows[:3]] == [0, 1, 2]
    assert wide.note == "20 cell(s) over 65,536 bytes were cut (limits.query_cell_max_bytes)"
    assert all(len(row[1].encode()) <= caps.max_cell_bytes for row in wide.rows)
    assert wide.rows[0][1].startswith("y" * 60_000)
    assert wide.rows[0][1].endswith(
        "[cut: 1,000,000 bytes, over limits.query_cell_max_bytes of 65,536]"
    )
    assert heavy.truncated and 100 <= len(heavy.rows) < 400
    assert (
        heavy.note == f"rows after the first {len(heavy.rows)} were dropped: the result "
        "passed 8,000,000 bytes (limits.query_max_bytes)"
    )


def nao_project_on(root: Path, server: SnowflakeServer, base_url: str, **fields: str) -> Path:
    """The nao test project, its database a Snowflake one named with nao's own fields."""
    project = write_nao_project(root, base_url=base_url)
    config = yaml.safe_load((project / "nao_config.yaml").read_text())
    config["databases"] = [
        {
            "name": "shop",
            "type": "snowflake",
            "account_id": "emulated",
            "username": READER,
            "password": "__password__",
            "database": "SHOP",
            "schema": "PUBLIC",
            "warehouse": WAREHOUSE,
            **server.address,  # not nao's: where the emulator listens
            **fields,
        }
    ]
    text = yaml.safe_dump(config, sort_keys=False)
    # As nao's users write it (a YAML dump would double the quotes inside).
    text = text.replace("__password__", "\"{{ env('NAO_TEST_SF_PASSWORD') }}\"")
    (project / "nao_config.yaml").write_text(text)
    (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
    return project


def test_a_nao_project_on_snowflake_runs_unchanged_with_duckdbs_verdicts(tmp_path, snowflake):
    password = snowflake.config["users"][READER]["password"]
    env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test", "NAO_TEST_SF_PASSWORD": password}
    with ScriptedServer("openai", script=by_prompt) as server:
        on_duckdb = write_nao_project(tmp_path / "duck", base_url=server.base_url)
        (on_duckdb / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        duck = run_cli("test", "--date", DAY, "--format", "json", cwd=on_duckdb, env=env)
        project = nao_project_on(tmp_path / "sf", snowflake, server.base_url)
        result = run_cli_subprocess("test", "--date", DAY, "--format", "json", cwd=project, env=env)
    no_traceback(result)
    assert result.returncode == duck.returncode == 1, result.stdout + result.stderr
    verdicts = {r["name"]: r["passed"] for r in json.loads(result.stdout)["results"]}
    assert verdicts == {r["name"]: r["passed"] for r in json.loads(duck.stdout)["results"]}
    assert verdicts == {"total_revenue": True, "order_count": False}
    assert f"runs its queries on warehouse '{WAREHOUSE}' of account 'emulated'" in result.stderr
    for path in (project / ".eval").rglob("*"):  # the password is nowhere in our state
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"password": "Wrong-Secret-4410"}, "Incorrect username or password was specified"),
        ({"port": "{port}"}, "Could not connect to Snowflake backend"),
    ],
    ids=["wrong password", "unreachable host"],
)
def test_a_database_that_does_not_open_is_one_line_and_exit_2(tmp_path, snowflake, fields, cause):
    fields = {k: v.format(port=free_port()) for k, v in fields.items()}
    project = nao_project_on(tmp_path / "shop", snowflake, "http://127.0.0.1:9/v1", **fields)
    env = {**cli_env(), "NAO_TEST_SF_PASSWORD": "unused", KEY_VARIABLE: "sk-unused"}
    result = run_cli("test", "--date", DAY, cwd=project, env=env)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "database 'shop' (snowflake)" in line]
    assert len(lines) == 1, result.stderr
    assert (
        lines[0]
        .strip()
        .startswith("nao_config.yaml:3: databases[0]: database 'shop' (snowflake): ")
    )
    assert cause in lines[0]
    assert "Wrong-Secret" not in result.stderr + result.stdout

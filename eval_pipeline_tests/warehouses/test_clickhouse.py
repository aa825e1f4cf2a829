"""ClickHouse as a warehouse, on a real server (Debian's 18.16) started here: verdicts, refusals, limits, types and the real command.

One server for the module (`clickhouse_server.py`), holding the small warehouse.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from eval_pipeline.grading import compare_results, frame_from_rows
from eval_pipeline.sandbox import (
    ForbiddenStatement,
    QueryFailed,
    QueryTimeout,
    SandboxLimits,
    ServerSandbox,
    SqlSandbox,
)
from eval_pipeline.warehouses import PrivilegedRole, StatementFailed
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project
from eval_pipeline_tests.warehouses.clickhouse_server import (
    SLOW_QUERY,
    ClickHouseServer,
    clickhouse_missing,
    clickhouse_server,
)
from eval_pipeline_tests.warehouses.servers import free_port
from eval_pipeline_tests.warehouses.test_same_verdicts import CASES, _frames

pytestmark = pytest.mark.slow  # starts a server


@pytest.fixture(scope="module")
def clickhouse() -> Iterator[ClickHouseServer]:
    if reason := clickhouse_missing():
        pytest.skip(reason)
    with clickhouse_server() as server:
        yield server


def _frame_or_error(sandbox, sql):
    try:
        result = sandbox.execute(sql)
    except QueryFailed as error:
        return error.message
    return frame_from_rows(result.columns, [list(row) for row in result.rows])


@pytest.fixture(scope="module")
def verdict_frames(clickhouse, duckdb_warehouse):
    pairs = [(reference, agent) for reference, agent, _ in CASES]
    with SqlSandbox.for_file(duckdb_warehouse) as sandbox:
        duck = _frames(sandbox, pairs)
    with ServerSandbox(clickhouse.database()) as sandbox:
        house = [(_frame_or_error(sandbox, r), _frame_or_error(sandbox, a)) for r, a in pairs]
    return duck, house


def test_the_verdict_suite_gives_duckdbs_verdicts_and_references(verdict_frames):
    """An agent's query the server fails is a failed test, as in a run: ClickHouse refuses
    CAST(NULL AS Date) where DuckDB gives NULL (the paid_at of unpaid orders)."""
    duck, house = verdict_frames
    verdicts = [
        not isinstance(agent, str)
        and compare_results(agent, reference, ordered="ORDER BY" in sql).passed
        for (reference, agent), (sql, _, _) in zip(house, CASES, strict=True)
    ]
    assert verdicts == [expected for _, _, expected in CASES]
    assert [isinstance(agent, str) for _, agent in house] == [
        False,
        True,
        False,
        False,
        False,
        False,
    ]
    assert "Cannot convert NULL value to non-Nullable type" in house[1][1]
    for i, ((reference, _), (duck_reference, _)) in enumerate(zip(house, duck, strict=True)):
        comparison = compare_results(reference, duck_reference)
        assert comparison.passed, (CASES[i][0], comparison.message)


HOSTILE = [
    ("INSERT INTO orders (id) VALUES (99)", "INSERT is not allowed"),
    ("ALTER TABLE orders DELETE WHERE 1", "is not allowed"),
    ("CREATE TABLE x (a Int8) ENGINE = Memory", "is not allowed"),
    ("DROP TABLE orders", "is not allowed"),
    ("SYSTEM SHUTDOWN", "SYSTEM is not allowed"),
    ("KILL QUERY WHERE 1", "is not allowed"),
    ("OPTIMIZE TABLE orders FINAL", "OPTIMIZE is not allowed"),
    ("SET readonly = 0", "SET is not allowed"),
    ("SELECT 1 SETTINGS max_execution_time = 0", "SETTINGS is not allowed"),
    ("SELECT * FROM (SELECT 1 SETTINGS readonly = 0)", "SETTINGS is not allowed"),
    ("SELECT 1 FORMAT JSON", "FORMAT is not allowed"),
    ("SELECT * FROM orders INTO OUTFILE '/tmp/x.csv'", "INTO OUTFILE is not allowed"),
    ("SELECT * FROM url('http://127.0.0.1:1/x', CSV, 'a String')", "url() is not allowed"),
    ("SELECT * FROM file('x.csv', CSV, 'a String')", "file() is not allowed"),
    ("SELECT * FROM remote('127.0.0.1', system.one)", "remote() is not allowed"),
    ("SELECT * FROM mysql('h:3306', 'd', 't', 'u', 'p')", "mysql() is not allowed"),
    ("SELECT * FROM executable('x.sh', CSV, 'a String')", "executable() is not allowed"),
    ("SELECT 1 FROM orders WHERE id IN url('http://127.0.0.1:1/', CSV, 'a Int32')", "url"),
    ("SELECT sleepEachRow(1) FROM orders", "sleepEachRow is not allowed"),
    ("SELECT 1; DROP TABLE orders", "one SQL statement per call"),
    ("SELECT 1 # DROP TABLE orders", "The character # is only allowed"),
    ("SELECT $$x$$", "The character $ is only allowed"),
    ("SELECT 1 /* a /* nested */ comment */", "Nested /* comments"),
]


@pytest.mark.parametrize(("sql", "refusal"), HOSTILE, ids=[sql for sql, _ in HOSTILE])
def test_writes_escapes_settings_and_outside_reads_are_refused_by_the_check_alone(
    clickhouse, sql, refusal
):
    """As a user that may write (allow_privileged_role), so only the check stands between."""
    database = clickhouse.owner.database(allow_privileged_role=True)
    with ServerSandbox(database) as sandbox, pytest.raises(ForbiddenStatement) as refused:
        sandbox.execute(sql)
    assert refusal in refused.value.message
    client = clickhouse.client()
    assert client.execute("SELECT count() FROM shop.orders") == [(5,)]  # nothing written
    assert client.execute("EXISTS TABLE shop.x") == [(0,)]


def test_a_user_that_can_write_is_refused_with_the_recipe_of_a_read_only_one(clickhouse):
    with pytest.raises(PrivilegedRole) as refused:
        ServerSandbox(clickhouse.owner.database())
    message = refused.value.message
    assert "readonly = 0: it may insert, alter, create and drop" in message
    assert "SETTINGS readonly = 2; GRANT SELECT ON shop.* TO eval_reader" in message
    assert "<readonly>2</readonly>" in message
    assert clickhouse.passwords["evaluser"] not in message


def test_the_server_itself_refuses_a_write_that_passed_no_check(clickhouse):
    """The first defence is the user's readonly setting, not the check: a session's
    statement sent straight, past the check, is refused by the server, as the read-only
    users (readonly 2 and 1) and as the writing one let in by allow_privileged_role (each
    of its queries carries readonly = 2)."""
    from eval_pipeline.warehouses import connect

    for user in ("eval_reader", "eval_strict", "evaluser"):
        database = clickhouse.as_user(user).database(allow_privileged_role=True)
        connection = connect(database)
        connection.begin_read_only(5)
        with pytest.raises(StatementFailed, match="readonly mode"):
            list(connection.stream("CREATE TABLE shop.y (a Int8) ENGINE = Memory").batches)
        connection.close()
    assert clickhouse.client().execute("EXISTS TABLE shop.y") == [(0,)]


def test_table_functions_are_the_servers_to_refuse_under_readonly_1(clickhouse):
    strict = ServerSandbox(clickhouse.as_user("eval_strict").database())
    forbidden = pytest.raises(QueryFailed, match="Table functions are forbidden in readonly mode")
    with strict, forbidden:
        strict.execute("SELECT count() FROM numbers(10)")
    with ServerSandbox(clickhouse.database()) as sandbox:  # readonly = 2: numbers() is allowed
        assert sandbox.execute("SELECT count() AS n FROM numbers(10)").rows == [(10,)]


@pytest.mark.parametrize("user", ["eval_reader", "eval_strict"])
def test_a_slow_query_is_stopped_on_the_server(clickhouse, user):
    """readonly = 2: the server's max_execution_time; readonly = 1 (no settings from the
    client): the watchdog's KILL QUERY. Either way nothing is left running."""
    limits = SandboxLimits(timeout_s=2)
    started = time.monotonic()
    sandbox = ServerSandbox(clickhouse.as_user(user).database(), limits)
    with sandbox, pytest.raises(QueryTimeout):
        sandbox.execute(SLOW_QUERY)
    assert time.monotonic() - started < 2 + 5
    client = clickhouse.client()
    deadline = time.monotonic() + 5
    while client.execute(f"SELECT count() FROM system.processes WHERE user = '{user}'")[0][0]:
        assert time.monotonic() < deadline, "the query still runs on the server"
        time.sleep(0.1)


def test_a_huge_result_is_bounded_and_the_rest_cancelled(clickhouse):
    limits = SandboxLimits(store_max_rows=100_000, store_max_bytes=1_000_000)
    started = time.monotonic()
    with ServerSandbox(clickhouse.database(), limits) as sandbox:
        result = sandbox.execute(
            "SELECT number, arrayStringConcat(arrayMap(i -> 'xxxxxxxxxx', range(100))) AS pad FROM system.numbers"
        )
        again = sandbox.execute("SELECT count() AS n FROM orders")  # the session goes on
    assert time.monotonic() - started < 10
    assert result.truncated and 0 < result.row_count < 1_000
    assert "limits.query_max_bytes" in (result.note or "")
    assert again.rows == [(5,)]


def test_types_come_as_data_and_what_has_no_faithful_type_as_text(clickhouse):
    client = clickhouse.client()
    client.execute(
        "CREATE TABLE shop.kinds (id UInt64, big UInt64, small Int8, price Decimal(18, 4), "
        "maybe Nullable(Float64), lc LowCardinality(String), kind Enum8('a' = 1, 'b' = 2), "
        "tags Array(String), pair Tuple(Int32, String), nested Array(Array(Nullable(Int32))), "
        "at DateTime('UTC'), day Date, fixed FixedString(3)) ENGINE = MergeTree ORDER BY id",
        settings={"allow_experimental_low_cardinality_type": 1},
    )
    at = dt.datetime(2024, 3, 1, 9, 30, 5, tzinfo=dt.UTC)
    client.execute(
        "INSERT INTO shop.kinds VALUES",
        [
            (
                1,
                2**64 - 1,
                -128,
                Decimal("1234.5678"),
                None,
                "x",
                "b",
                ["é", 'q"'],
                (7, "seven"),
                [[1, None], []],
                at,
                dt.date(2024, 2, 29),
                "abc",
            ),
        ],
    )
    with ServerSandbox(clickhouse.database()) as sandbox:
        result = sandbox.execute("SELECT * FROM kinds")
        tables = {table.name: table for table in sandbox.tables()}
    assert result.column_types == [
        "UBIGINT", "UBIGINT", "TINYINT", "DECIMAL(18,4)", "DOUBLE", "VARCHAR", "VARCHAR",
        "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP WITH TIME ZONE", "DATE", "VARCHAR",
    ]  # fmt: skip
    (row,) = result.rows
    assert row[1] == 18446744073709551615  # never wrapped to -1
    assert row[2] == -128 and row[4] is None and row[5] == "x" and row[6] == "b"
    assert Decimal(str(row[3])) == Decimal("1234.5678")
    assert json.loads(row[7]) == ["é", 'q"'] and json.loads(row[8]) == [7, "seven"]
    assert json.loads(row[9]) == [[1, None], []]
    assert row[10].startswith("2024-03-01T09:30:05") and row[11] == "2024-02-29"
    assert row[12] == "abc"
    # The agent is told the engine's own types and the column comments.
    assert ("id", "int32", "order id") in tables["orders"].columns
    assert ("tags", "array(string)", "") in tables["kinds"].columns


def _suite(root: Path, database: dict, base_url: str, nao: bool = False) -> Path:
    (root / "tests" if nao else root / "cases").mkdir(parents=True)
    case = {"name": "revenue", "prompt": "Revenue?", "sql": "SELECT SUM(amount) AS r FROM orders"}
    (root / ("tests" if nao else "cases") / "revenue.yml").write_text(yaml.safe_dump(case))
    if nao:
        (root / "nao_config.yaml").write_text(
            yaml.safe_dump({"project_name": "shop", "databases": [database]})
        )
        return root
    config = {
        "test": {"models": ["local:agent"], "extraction": "last_query"},
        "databases": [database],
        "llm": {"providers": [{"provider": "local", "base_url": base_url}]},
    }
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config))
    return root


@pytest.mark.parametrize("failure", ["wrong password", "unreachable host"])
def test_a_wrong_password_or_an_unreachable_host_is_one_line_and_exit_2(
    clickhouse, tmp_path, failure, monkeypatch
):
    url = clickhouse.url
    if failure == "wrong password":
        url = url.replace(clickhouse.password, "Not-The-Password")
    else:
        url = url.replace(f":{clickhouse.port}/", f":{free_port()}/")
    monkeypatch.setenv("SHOP_CH_URL", url)
    database = {"name": "shop", "type": "clickhouse", "url": "{{ env('SHOP_CH_URL') }}"}
    with ScriptedServer("openai") as server:
        root = _suite(tmp_path / "suite", database, server.base_url)
        result = run_cli("test", "--date", DAY, "-m", "local:agent", cwd=root)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if "database 'shop'" in line]
    assert len(lines) == 1, result.stderr
    assert "cannot connect" in lines[0]
    assert ("login was refused" in lines[0]) == (failure == "wrong password")
    assert "Not-The-Password" not in result.stderr + result.stdout


def test_a_nao_project_on_clickhouse_runs_unchanged_with_duckdbs_verdicts(
    clickhouse, duckdb_warehouse, tmp_path
):
    """nao's own project (`write_nao_project`) with its database on ClickHouse in nao's own
    fields (host, port, protocol, database, user, password from the environment, secure as
    a YAML boolean), and the same project on the DuckDB copy: the same verdicts."""
    on_clickhouse = textwrap.indent(
        textwrap.dedent(f"""\
            - name: shop
              type: clickhouse
              host: {clickhouse.host}
              port: {clickhouse.port}
              protocol: native
              database: {clickhouse.dbname}
              user: {clickhouse.user}
              password: "{{{{ env('NAO_CH_PASSWORD') }}}}"
              secure: false
            """),
        "  ",
    )
    on_duckdb = f"  - name: shop\n    type: duckdb\n    path: {duckdb_warehouse}\n"
    env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test", "NAO_CH_PASSWORD": clickhouse.password}
    verdicts = {}
    for name, database in (("clickhouse", on_clickhouse), ("duckdb", on_duckdb)):
        with ScriptedServer("openai", script=by_prompt) as server:
            project = write_nao_project(tmp_path / name, base_url=server.base_url)
            config = project / "nao_config.yaml"
            text = config.read_text()
            shop = "  - name: shop\n    type: duckdb\n    path: data/shop.duckdb\n"
            assert shop in text
            config.write_text(text.replace(shop, database))
            (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
            result = run_cli("test", "--date", DAY, "--format", "json", cwd=project, env=env)
        no_traceback(result)
        assert result.returncode == 1, result.stdout + result.stderr  # one test fails
        document = json.loads(result.stdout)
        verdicts[name] = {r["name"]: r["passed"] for r in document["results"]}
    assert (
        verdicts["clickhouse"]
        == verdicts["duckdb"]
        == {
            "total_revenue": True,
            "order_count": False,
        }
    )
    assert clickhouse.password not in json.dumps(document)

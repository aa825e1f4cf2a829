"""BigQuery behind the real `google-cloud-bigquery`, against bqemulator started on 127.0.0.1: the same verdicts as DuckDB, types as BigQuery gives them, hostile SQL refused, results bounded, faults one line, a nao project as it is.

What the emulator cannot show (it runs each job to its end inside the request, has no cost
model, and ignores job timeouts and `maximum_bytes_billed`) is unit-tested against a fake
client in test_bigquery_rules.py, and docs/warehouses.md says what only the real service
proves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from eval_pipeline.grading import compare_results, frame_from_rows
from eval_pipeline.sandbox import (
    ForbiddenStatement,
    QueryTimeout,
    SandboxLimits,
    ServerSandbox,
    SqlSandbox,
    WarehouseUnavailable,
)
from eval_pipeline.suite import DatabaseConfig, Templated
from eval_pipeline.warehouses import ConnectionFailed, StatementFailed, connect, schema_description
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project
from eval_pipeline_tests.warehouses.bigquery_server import (
    PROJECT,
    Emulator,
    EmulatorUnavailable,
    bigquery_emulator,
    load_small_warehouse,
)
from eval_pipeline_tests.warehouses.servers import free_port
from eval_pipeline_tests.warehouses.test_same_verdicts import CASES

pytestmark = pytest.mark.slow

#: The nao project's orders (nao_project.write_nao_project), in the dataset `nao_shop`.
NAO_ORDERS = [(1, "al", 10.5), (2, "bo", 80.0), (3, "bo", 42.25)]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    try:
        with bigquery_emulator(tmp_path_factory.mktemp("bqemulator")) as running:
            load_small_warehouse(running)
            client = running.client()
            client.create_dataset(f"{PROJECT}.nao_shop", exists_ok=True)
            client.query(
                "CREATE TABLE nao_shop.orders (id INT64, customer STRING, amount FLOAT64)"
            ).result()
            rows = ", ".join(f"({i}, '{c}', {a})" for i, c, a in NAO_ORDERS)
            client.query(f"INSERT INTO nao_shop.orders VALUES {rows}").result()
            client.close()
            yield running
    except EmulatorUnavailable as error:
        pytest.skip(f"bqemulator cannot be installed here: {error}")


def database(emulator: Emulator, name: str = "shop", **options: str) -> DatabaseConfig:
    return DatabaseConfig(
        name, "bigquery", url=Templated(emulator.url(**options), secret="url_password")
    )


def _frames(sandbox, pairs):
    def frame(sql):
        result = sandbox.execute(sql)
        return frame_from_rows(result.columns, [list(row) for row in result.rows])

    return [(frame(reference), frame(agent)) for reference, agent in pairs]


def test_the_verdict_suite_gives_duckdbs_verdicts_and_rows(emulator, duckdb_warehouse):
    pairs = [(reference, agent) for reference, agent, _ in CASES]
    with SqlSandbox.for_file(duckdb_warehouse) as sandbox:
        on_duckdb = _frames(sandbox, pairs)
    with ServerSandbox(database(emulator)) as sandbox:
        on_bigquery = _frames(sandbox, pairs)
    verdicts = [
        compare_results(agent, reference, ordered="ORDER BY" in sql).passed
        for (reference, agent), (sql, _, _) in zip(on_bigquery, CASES, strict=True)
    ]
    assert verdicts == [expected for _, _, expected in CASES]
    for i, ((ours, _), (duck, _)) in enumerate(zip(on_bigquery, on_duckdb, strict=True)):
        comparison = compare_results(ours, duck)
        assert comparison.passed, (CASES[i][0], comparison.message)


def test_the_agent_is_told_bigquery_and_the_datasets_tables_with_comments(emulator):
    with connect(database(emulator)) as connection:
        text = schema_description(connection)
    assert text.startswith("Database 'shop' (BigQuery SQL):")
    assert "table customers — One row per customer" in text
    assert "  - credit_limit numeric" in text and "  - paid_at timestamp" in text
    assert "  - ordered_at datetime" in text  # DATETIME and TIMESTAMP kept apart


def test_types_come_as_bigquery_gives_them_and_never_a_wrong_value(emulator):
    sql = (
        "SELECT NUMERIC '123456789012345.125' AS n, "
        "CAST('1.5' AS BIGNUMERIC) AS bn, STRUCT(1 AS a, 'x' AS b) AS s, [3, 1, 2] AS arr, "
        "JSON '{\"k\": [1, 2]}' AS j, DATETIME '2024-03-01 09:30:00' AS dt, "
        "TIMESTAMP '2024-03-01 09:30:00+02' AS ts, INTERVAL 3 DAY AS iv, "
        "DATE '2024-02-29' AS d, b'ab' AS raw, CAST('NaN' AS FLOAT64) AS f"
    )
    with ServerSandbox(database(emulator)) as sandbox:
        result = sandbox.execute(sql)
    types = dict(zip(result.columns, result.column_types, strict=True))
    # The emulator types BIGNUMERIC as its NUMERIC; BigQuery's own would give DECIMAL(38,1).
    assert types.pop("bn") in ("DECIMAL(38,1)", "DECIMAL(38,9)")
    assert types == {
        "n": "DECIMAL(38,9)",
        "s": "VARCHAR",
        "arr": "VARCHAR",
        "j": "VARCHAR",
        "dt": "TIMESTAMP",
        "ts": "TIMESTAMP WITH TIME ZONE",
        "iv": "INTERVAL",
        "d": "DATE",
        "raw": "BLOB",
        "f": "DOUBLE",
    }
    (row,) = result.rows
    values = dict(zip(result.columns, row, strict=True))
    with connect(database(emulator)) as connection:  # the exact value, before the sandbox's
        connection.begin_read_only(30.0)  # conversion for the model (decimals as numbers)
        (batch,) = list(connection.stream(sql).batches)
        connection.end()
    assert batch.column(0).to_pylist() == [Decimal("123456789012345.125")]
    (interval,) = batch.column(result.columns.index("iv")).to_pylist()
    assert tuple(interval) == (0, 3, 0)  # 0 months, 3 days, 0 ns
    assert json.loads(values["s"]) == {"a": 1, "b": "x"}
    assert json.loads(values["arr"]) == [3, 1, 2]  # the order BigQuery gave
    assert json.loads(values["j"]) == {"k": [1, 2]}
    assert str(values["dt"]).startswith("2024-03-01") and "09:30" in str(values["dt"])
    assert "07:30:00" in str(values["ts"])  # in UTC


HOSTILE = [
    "DELETE FROM orders WHERE TRUE",
    "INSERT INTO orders (id) VALUES (99)",
    "UPDATE orders SET amount = 0 WHERE TRUE",
    "MERGE orders t USING orders s ON FALSE WHEN NOT MATCHED THEN INSERT ROW",
    "TRUNCATE TABLE orders",
    "CREATE TABLE copy AS SELECT * FROM orders",
    "DROP TABLE orders",
    "CREATE TEMP FUNCTION f(x INT64) AS (x)",
    "DECLARE x INT64 DEFAULT 1",
    "SET @@dataset_id = 'other'",
    "BEGIN DELETE FROM orders WHERE TRUE; END",
    "EXECUTE IMMEDIATE 'DELETE FROM orders WHERE TRUE'",
    "CALL shop.clean_up()",
    "EXPORT DATA OPTIONS(uri='gs://bucket/x-*.csv', format='CSV') AS SELECT * FROM orders",
    "LOAD DATA INTO shop.orders FROM FILES(format='CSV', uris=['gs://bucket/x.csv'])",
    "SELECT * FROM EXTERNAL_QUERY('us.conn', 'SELECT 1')",
    "SELECT shop.remote_function(amount) FROM orders",
    "SELECT * FROM ML.PREDICT(MODEL shop.m, (SELECT 1 AS x))",
    "SELECT 1 AS a; DELETE FROM orders WHERE TRUE",
    "GRANT `roles/bigquery.dataEditor` ON TABLE shop.orders TO 'user:a@example.com'",
]


def test_writes_scripts_procedures_files_and_outside_calls_are_refused(emulator):
    with ServerSandbox(database(emulator)) as sandbox:
        for sql in HOSTILE:
            with pytest.raises(ForbiddenStatement):
                sandbox.execute(sql)
        assert sandbox.execute("SELECT COUNT(*) AS n FROM orders").rows == [(5,)]


def test_a_dataset_that_is_not_there_is_named(emulator):
    missing = DatabaseConfig(
        "other", "bigquery", url=Templated(emulator.url(dataset="nope"), secret="url_password")
    )
    with pytest.raises(ConnectionFailed, match=f"'other'.*cannot open dataset {PROJECT}.nope"):
        connect(missing)


def test_bigquerys_own_reading_refuses_what_is_not_a_query(emulator):
    """Past the sandbox's rules, the session's dry run asks BigQuery what the statement is."""
    with connect(database(emulator)) as connection:
        connection.begin_read_only(30.0)
        with pytest.raises(StatementFailed, match="reads this as a DELETE statement"):
            connection.stream("DELETE FROM orders WHERE TRUE")
        connection.end()
        connection.begin_read_only(30.0)
        (batch,) = list(connection.stream("SELECT COUNT(*) AS n FROM orders").batches)
        connection.end()
    assert batch.column(0).to_pylist() == [5]


def test_a_huge_result_is_bounded(emulator):
    limits = SandboxLimits(store_max_rows=1_000, store_max_bytes=50_000)
    with ServerSandbox(database(emulator), limits) as sandbox:
        result = sandbox.execute(
            "SELECT x, REPEAT('y', 100) AS pad FROM UNNEST(GENERATE_ARRAY(1, 200000)) AS x"
        )
        assert result.truncated
        assert len(result.rows) < 1_000
        # A row larger than the whole byte budget ends the result before it (never converted).
        wide = sandbox.execute(
            "SELECT x, IF(x = 3, REPEAT('y', 2000000), 'small') AS pad "
            "FROM UNNEST(GENERATE_ARRAY(1, 5)) AS x ORDER BY x"
        )
    assert wide.truncated and [row[0] for row in wide.rows] == [1, 2]


def test_unusable_credentials_and_an_unreachable_endpoint_are_one_line_with_exit_2(
    emulator, tmp_path
):
    key = (
        "-----BEGIN PRIVATE KEY-----\\nNotAKeyButSecretEnough123456\\n-----END PRIVATE KEY-----\\n"
    )
    credentials = json.dumps(
        {
            "type": "service_account",
            "client_email": "a@b.iam",
            "private_key": key.replace("\\n", "\n"),
        }
    )
    down = f"http://127.0.0.1:{free_port()}"
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "count.yml").write_text(
        "prompt: How many orders?\nsql: SELECT COUNT(*) AS n FROM orders\n"
    )
    for url, cause in (
        (
            f"bigquery://{PROJECT}/shop?api_endpoint={emulator.endpoint}"
            "&credentials_json={{ env('BQ_TEST_CREDENTIALS') }}",
            "cannot read the credentials (credentials_json)",
        ),
        (f"bigquery://{PROJECT}/shop?api_endpoint={down}", "cannot open dataset"),
    ):
        (root / "eval_config.yaml").write_text(
            f'databases:\n  - name: warehouse\n    type: bigquery\n    url: "{url}"\n'
        )
        started = time.monotonic()
        run = run_cli(
            "test", "--date", DAY, cwd=root, env={**cli_env(), "BQ_TEST_CREDENTIALS": credentials}
        )
        no_traceback(run)
        assert run.returncode == 2, run.stdout + run.stderr
        lines = [line for line in run.stderr.splitlines() if "'warehouse'" in line]
        assert len(lines) == 1 and cause in lines[0], run.stderr
        assert "NotAKeyButSecret" not in run.stdout + run.stderr
        stored = [
            p for p in root.rglob("*") if p.is_file() and b"NotAKeyButSecret" in p.read_bytes()
        ]
        assert stored == []  # nor in any file the command left (store, logs, results)
        assert time.monotonic() - started < 30


def test_a_nao_project_on_bigquery_runs_as_is_with_duckdbs_verdicts(emulator, tmp_path):
    on = {}
    for engine in ("duckdb", "bigquery"):
        with ScriptedServer("openai", script=by_prompt) as server:
            project = write_nao_project(tmp_path / engine, base_url=server.base_url)
            if engine == "bigquery":  # nao's own fields for the same orders
                config = (project / "nao_config.yaml").read_text()
                config = config.replace(
                    "    type: duckdb\n    path: data/shop.duckdb\n",
                    f"    type: bigquery\n    project_id: {PROJECT}\n    dataset_id: nao_shop\n"
                    "    location: US\n    max_query_size: 0.5\n"
                    '    partition_filters: {orders: "id > 0"}\n',
                )
                (project / "nao_config.yaml").write_text(config)
            (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
            env = {
                **cli_env(),
                KEY_VARIABLE: "sk-vllm-test",
                "BIGQUERY_EMULATOR_HOST": emulator.endpoint,
            }
            run = run_cli("test", "--date", DAY, "--format", "json", cwd=project, env=env)
        no_traceback(run)
        assert run.returncode == 1, run.stdout + run.stderr  # one test fails, on both
        on[engine] = {r["name"]: r["passed"] for r in json.loads(run.stdout)["results"]}
        if engine == "bigquery":
            # The money bound, seen before paying: nao's max_query_size (GB) is the cap.
            assert "each query may bill at most 500.0 MB" in run.stderr, run.stderr
            assert "reference queries will scan" in run.stderr
            again = run_cli("test", "--date", DAY, cwd=project, env=env)  # nothing changed
            shown = again.stdout + again.stderr
            assert "No agent run executed: all 2 runs reused" in shown, shown
    assert on["bigquery"] == on["duckdb"] == {"total_revenue": True, "order_count": False}


def test_a_slow_query_ends_at_its_time_limit(emulator):
    """The emulator runs a job inside the request and cannot stop it: the call is given up at
    the time limit plus a grace and the job cancelled (BigQuery stops it at `job_timeout_ms`
    first). Last in the module: the emulator is busy until its query ends."""
    slow = "SELECT SUM(a * b) AS s FROM UNNEST(GENERATE_ARRAY(1, 33000)) a, UNNEST(GENERATE_ARRAY(1, 33000)) b"
    with ServerSandbox(database(emulator), SandboxLimits(timeout_s=1.0)) as sandbox:
        started = time.monotonic()
        with pytest.raises((QueryTimeout, WarehouseUnavailable)) as stopped:
            sandbox.execute(slow)
        assert time.monotonic() - started < 1.0 + 5.0 + 1.0
        assert isinstance(stopped.value, QueryTimeout), stopped.value

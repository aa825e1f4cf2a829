"""The agent's SQL on PostgreSQL and MariaDB: read-only, one statement, no files, stopped on time."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pymysql
import pytest

from eval_pipeline.sandbox import (
    ForbiddenStatement,
    QueryTimeout,
    SandboxError,
    SandboxLimits,
    ServerSandbox,
    WarehouseUnavailable,
)
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import SLOW_QUERY, Server, mysql_connection

# {path} is a file the server could write (its user owns /tmp entries it creates).
HOSTILE = {
    "postgres": [
        "COPY orders TO '{path}'",
        "COPY orders TO PROGRAM 'touch {path}'",
        "COPY orders FROM PROGRAM 'touch {path}'",
        "SELECT pg_read_file('/etc/hostname')",
        "SELECT pg_catalog.pg_read_binary_file('/etc/hostname')",
        "SELECT * FROM pg_ls_dir('/')",
        "SELECT lo_import('/etc/hostname')",
        "SELECT lo_export(1, '{path}')",
        "SELECT * INTO stolen FROM orders",
        "WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone",
        "DELETE FROM orders",
        "SELECT 1; DROP TABLE orders",
        "SELECT set_config('statement_timeout', '0', false)",
        "SELECT * FROM orders FOR UPDATE",
        "CREATE TABLE stolen AS SELECT * FROM orders",
        # EXPLAIN ANALYZE runs the statement it explains.
        "EXPLAIN ANALYZE DELETE FROM orders",
        "EXPLAIN (ANALYZE, FORMAT JSON) INSERT INTO customers (id, name) VALUES (99, 'x')",
        "EXPLAIN ANALYZE WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
        "EXPLAIN ANALYZE SELECT * INTO stolen FROM orders",
        "EXPLAIN ANALYZE CREATE TABLE stolen AS SELECT * FROM orders",
        "EXPLAIN (ANALYZE) SELECT lo_export(1, '{path}')",
        "EXPLAIN ANALYZE SELECT 1; DELETE FROM orders",
    ],
    "mysql": [
        "SELECT * FROM orders INTO OUTFILE '{path}'",
        "SELECT * INTO OUTFILE '{path}' FROM orders",
        "SELECT amount FROM orders LIMIT 1 INTO DUMPFILE '{path}'",
        "SELECT LOAD_FILE('/etc/hostname')",
        "LOAD DATA INFILE '/etc/hostname' INTO TABLE orders",
        "CREATE TABLE stolen AS SELECT * FROM orders",  # DDL would commit the transaction
        "DROP TABLE orders",
        "DELETE FROM orders",
        "SELECT 1; DROP TABLE orders",
        "SELECT * FROM orders FOR UPDATE",
        "SELECT GET_LOCK('x', 10)",
        # Executable comments: the server runs what every parser skips.
        "SELECT 1 /*! INTO OUTFILE '{path}' */",
        "SELECT 1 /*!50000 , LOAD_FILE('/etc/hostname') */",
        "SELECT 1 /*M! INTO DUMPFILE '{path}' */",
        "EXPLAIN ANALYZE DELETE FROM orders",
        "EXPLAIN SELECT * FROM orders INTO OUTFILE '{path}'",
    ],
}


def _snapshot(server: Server) -> list:
    """Every table's rows, in a fixed order, read over a separate session."""
    sql = ["SELECT * FROM customers ORDER BY id", "SELECT * FROM orders ORDER BY id"]
    if server.kind == "postgres":
        with psycopg.connect(server.url) as connection:
            tables = connection.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
            ).fetchall()
            return [sorted(tables), *(connection.execute(q).fetchall() for q in sql)]
    connection = _mysql(server)
    with connection.cursor() as cursor:
        cursor.execute("SHOW TABLES")
        found = [sorted(cursor.fetchall())]
        for q in sql:
            cursor.execute(q)
            found.append(cursor.fetchall())
    connection.close()
    return found


def _mysql(server: Server) -> pymysql.Connection:
    return mysql_connection(server)


@pytest.fixture(
    params=[pytest.param(kind, marks=pytest.mark.slow) for kind in ("postgres", "mariadb")]
)
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue(request.param)


def test_every_hostile_statement_is_refused_and_changes_nothing(server):
    before = _snapshot(server)
    with ServerSandbox(database_of(server)) as sandbox:
        for template in HOSTILE[server.kind]:
            path = Path(f"/tmp/eval-hostile-{uuid.uuid4().hex}")
            sql = template.format(path=path)
            with pytest.raises(SandboxError) as refused:
                sandbox.execute(sql)
            assert isinstance(refused.value, ForbiddenStatement), (sql, refused.value.message)
            assert not path.exists(), sql
            # The next query works: no transaction left aborted, no session lost.
            assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)], sql
    assert _snapshot(server) == before


def test_explain_of_a_select_shows_the_plan_as_on_duckdb(server):
    explains = ["EXPLAIN SELECT count(*) FROM orders"]
    if server.kind == "postgres":
        explains += [
            "EXPLAIN ANALYZE SELECT count(*) FROM orders",
            "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM orders WHERE amount > 1",
        ]
    with ServerSandbox(database_of(server)) as sandbox:
        for sql in explains:
            result = sandbox.execute(sql)
            assert result.rows and not result.truncated, sql
            plan = sandbox.render(result).lower()
            assert "orders" in plan, (sql, plan)
            if "ANALYZE" in sql:
                assert "actual" in plan, plan  # the plan as run, with its timings
        if server.kind == "postgres":  # SHOW, read the same way as EXPLAIN there
            assert sandbox.execute("SHOW standard_conforming_strings").rows == [("on",)]
        assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)]


def _running_sleeps(server: Server) -> list:
    if server.kind == "postgres":
        with psycopg.connect(server.owner.url) as connection:
            return connection.execute(
                "SELECT pid, query FROM pg_stat_activity "
                "WHERE state = 'active' AND query ILIKE '%generate_series%' "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
    connection = _mysql(server.owner)
    with connection.cursor() as cursor:
        cursor.execute("SHOW FULL PROCESSLIST")
        found = [row for row in cursor.fetchall() if "SEQ_1_TO" in str(row[7]).upper()]
    connection.close()
    return found


def test_a_sleep_is_stopped_on_the_server_within_the_limit(server):
    sleep = SLOW_QUERY[server.kind]
    with ServerSandbox(database_of(server), SandboxLimits(timeout_s=2.0)) as sandbox:
        # A query of minutes: the timeout, not the query, ended it...
        with pytest.raises(QueryTimeout, match="stopped after 2 s"):
            sandbox.execute(sleep)
        assert _running_sleeps(server) == []  # ...on the server too, not only in the client
        assert sandbox.execute("SELECT 42 AS answer").rows == [(42,)]


def test_a_result_over_the_row_cap_reaches_the_model_marked_as_cut(server):
    limits = SandboxLimits(store_max_rows=3, model_max_rows=2)
    with ServerSandbox(database_of(server), limits) as sandbox:
        result = sandbox.execute("SELECT id FROM orders ORDER BY id")
        assert result.truncated and result.rows == [(10,), (11,), (12,)]
        assert "showing 2 of more than 3 rows" in sandbox.render(result)
        assert sandbox.execute("SELECT count(*) AS n FROM customers").rows == [(4,)]


def test_a_server_error_reaches_the_model_and_the_next_query_works(server):
    with ServerSandbox(database_of(server)) as sandbox:
        with pytest.raises(SandboxError, match="no_such_table"):
            sandbox.execute("SELECT * FROM no_such_table")
        assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)]


def _end_sessions(server: Server, *, only_sleeping: bool) -> int:
    """End the test user's other sessions from outside, as a server restart would."""
    if server.kind == "postgres":
        with psycopg.connect(server.owner.url) as connection:
            sleeping = "AND query ILIKE '%generate_series%' " if only_sleeping else ""
            return len(
                connection.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE usename = '{server.user}' AND pid <> pg_backend_pid() {sleeping}"
                ).fetchall()
            )
    connection = _mysql(server.owner)
    ended = 0
    with connection.cursor() as cursor:
        cursor.execute("SHOW FULL PROCESSLIST")
        for row in cursor.fetchall():
            mine = row[0] == connection.thread_id() or row[1] != server.user
            if mine or (only_sleeping and "SEQ_1_TO" not in str(row[7]).upper()):
                continue
            cursor.execute(f"KILL CONNECTION {int(row[0])}")
            ended += 1
    connection.close()
    return ended


def test_a_session_the_server_dropped_between_queries_is_replaced(server):
    with ServerSandbox(database_of(server)) as sandbox:
        assert sandbox.execute("SELECT 1 AS one").rows == [(1,)]
        assert _end_sessions(server, only_sleeping=False) >= 1
        assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)]


def test_a_server_lost_during_a_query_is_an_infrastructure_error_then_work_goes_on(server):
    import threading

    sleep = SLOW_QUERY[server.kind]
    with ServerSandbox(database_of(server)) as sandbox:
        killer = threading.Timer(1.0, _end_sessions, (server,), {"only_sleeping": True})
        killer.start()
        with pytest.raises(
            WarehouseUnavailable, match=r"database 'shop' \(\w+\): lost the connection"
        ):
            sandbox.execute(sleep)
        killer.join()
        assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)]


def test_an_empty_server_result_still_loads_for_answer_extraction(server):
    import asyncio
    from datetime import date

    from eval_pipeline.agents import AgentRun, QueryRecord
    from eval_pipeline.grading import extract_answer
    from eval_pipeline_tests.agents.servers import ScriptedServer, answer, open_chat_model

    sql = "SELECT id, ordered_at, paid_at, amount, status FROM orders WHERE id < 0"
    with ServerSandbox(database_of(server)) as sandbox:
        result = sandbox.execute(sql)
    record = QueryRecord(
        "q1", sql, result.columns, result.column_types, [], 0, duration_ms=result.duration_ms
    )
    run = AgentRun("t", "m", 0, date(2026, 1, 1), "in", "ctx", queries=[record])
    with ScriptedServer("openai") as model_server:
        model_server.script(answer("```sql\nSELECT sum(amount) AS total FROM q1\n```"))

        async def go():
            async with open_chat_model(model_server) as model:
                return await extract_answer(run, ["total"], model=model)

        extraction = asyncio.run(go())
    assert extraction.status == "ok", extraction.message
    assert list(extraction.frame.columns) == ["total"]


def test_a_server_reading_backslashes_differently_cannot_smuggle_a_file_write(mariadb):
    # With NO_BACKSLASH_ESCAPES the server would end the string at 'a\' and write the file;
    # the parser reads \' as an escaped quote and sees one harmless string.
    path = Path(f"/tmp/eval-hostile-{uuid.uuid4().hex}")
    admin = _mysql(mariadb.owner)
    with admin.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.sql_mode")
        (before,) = cursor.fetchone()
        cursor.execute("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')")
    try:
        with ServerSandbox(database_of(mariadb)) as sandbox:
            with pytest.raises(SandboxError):
                sandbox.execute(f"SELECT 'a\\' INTO OUTFILE '{path}' -- '")
            assert sandbox.execute("SELECT 'it\\'s' AS s").rows == [("it's",)]
    finally:
        with admin.cursor() as cursor:
            cursor.execute("SET GLOBAL sql_mode = %s", (before,))
        admin.close()
    assert not path.exists()


_PEAK_CHILD = """
import json, resource, sys
from eval_pipeline.sandbox import ServerSandbox
from eval_pipeline.suite import DatabaseConfig, Templated
database = DatabaseConfig("shop", sys.argv[1], url=Templated(sys.argv[2], secret="url_password"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with ServerSandbox(database) as sandbox:
    result = sandbox.execute(sys.argv[3])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"extra_mb": (peak - before) / 1024, "rows": len(result.rows), "note": result.note}))
"""


def test_a_result_of_gigabytes_is_read_within_the_byte_cap_on_every_engine(server):
    # 3,000 rows of 5 MB: 15 GB if read whole. Measured in a child process of its own.
    import json
    import subprocess
    import sys

    big = {
        "postgres": "SELECT repeat('x', 5000000) AS s FROM generate_series(1, 3000)",
        "mysql": "SELECT repeat('x', 5000000) AS s FROM seq_1_to_3000",
    }[server.kind]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_CHILD, server.kind, server.url, big],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    measured = json.loads(done.stdout)
    assert "limits.query_max_bytes" in measured["note"] and measured["rows"] < 200
    # The kept rows (8 MB of cut cells), one batch and one 5 MB row: never gigabytes.
    assert measured["extra_mb"] < 300, measured

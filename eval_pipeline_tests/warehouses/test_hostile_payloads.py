"""Hostile SQL sent by a model through the built-in agent to real servers: refused, nothing touched.

The payloads are those an adversarial pass found past the earlier statement check (SQL run
from inside a string on PostgreSQL, a comment MariaDB reads differently from sqlglot). Each
runs twice: as the read-only role a user should create, and as the server's owner with
`allow_privileged_role: true`, so the statement check is shown to hold on its own. A
privileged role without the opt-out is refused before any statement, with the recipe.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

from eval_pipeline.agents import AgentRun, RunStatus, execute_run
from eval_pipeline.suite import load_suite
from eval_pipeline.warehouses import PrivilegedRole, connect, database_warnings
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    exchanges,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import open_factory, request_for, write_suite
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import Server, global_sql_mode, mysql_connection

pytestmark = pytest.mark.slow

PASSWD = "root:x:0:0"
#: What each refusal the model reads says (the sandbox's words, not the server's).
REFUSALS = (
    "only allowed inside",
    "is not allowed",
    "are not allowed",
    "could not be parsed",
    "one SQL statement per call",
)
POSTGRES_PAYLOADS = [
    # ts_stat runs the SQL text it is given: it ended another session.
    "SELECT * FROM ts_stat('SELECT to_tsvector(pg_terminate_backend(pid)::text) FROM "
    "pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = ''client backend''')",
    "SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''/etc/passwd''))')",
    "SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, true, '')",
    "SELECT cursor_to_xml('c', 1, true, true, '')",
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT * FROM pg_ls_dir('/')",
    "SELECT pg_reload_conf()",
    "SELECT pg_logical_emit_message(true, 'eval', 'wal')",
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
    "SELECT dblink('dbname=postgres', 'SELECT 1')",
    "SELECT pg_catalog.set_config('statement_timeout', '0', false)",
    "SELECT ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, ''b''::tsquery')",
    "COPY orders TO '{path}'",
    "SELECT 1 AS x -- a comment\u3000with a wide space\n; SELECT pg_read_file('/etc/passwd')",
    # Stable, but they assign a transaction id inside the read-only transaction.
    "SELECT txid_current()",
    "SELECT pg_current_xact_id()",
]
MYSQL_PAYLOADS = [
    # sqlglot read `--` + U+3000 as a comment; MariaDB as arithmetic, and ran the rest.
    "SELECT x --\u3000y, LOAD_FILE('/etc/passwd') AS leak\nFROM (SELECT 1 AS x, 1 AS \u3000y) t",
    "SELECT x --\u00a0y, LOAD_FILE('/etc/passwd') AS leak\nFROM (SELECT 1 AS x, 1 AS \u00a0y) t",
    "SELECT x --\u3000y INTO OUTFILE '{path}'\nFROM (SELECT 1 AS x, 1 AS \u3000y) t",
    "SELECT x --\u3000y, GET_LOCK('eval-hostile', 0) AS l\nFROM (SELECT 1 AS x, 1 AS \u3000y) t",
    "SELECT x --y, LOAD_FILE('/etc/passwd') AS leak FROM (SELECT 1 AS x, 1 AS y) t",
    "SELECT GET_LOCK('eval-hostile', 0)",
    "SELECT SLEEP(5)",
    "SELECT BENCHMARK(100000000, MD5('x'))",
    "SELECT 1 /*! , LOAD_FILE('/etc/passwd') */",
    "SELECT 1 # comment\u2028, LOAD_FILE('/etc/passwd')",
    "SELECT * FROM orders INTO OUTFILE '{path}'",
]

#: Under ANSI_QUOTES, which the combination modes ANSI, ORACLE, POSTGRESQL, DB2, MSSQL and
#: MAXDB bring, `"a\"` was an identifier to the server and `#"` a comment, so SLEEP, GET_LOCK,
#: LOAD_FILE and INTO OUTFILE ran where the check read one string.
ANSI_QUOTED_PAYLOADS = [
    'SELECT 1 "a\\", SLEEP(2) AS s, GET_LOCK(\'eval-hostile\', 0) AS g #"\nFROM orders LIMIT 1',
    'SELECT 1 "a\\", LOAD_FILE(\'/etc/passwd\') AS leak #"\nFROM orders LIMIT 1',
    'SELECT 1 "a\\" INTO OUTFILE \'{path}\' #"\nFROM orders LIMIT 1',
]
COMBINATION_SQL_MODES = ["ANSI", "ORACLE", "POSTGRESQL", "DB2", "MSSQL", "MAXDB"]


@pytest.fixture(params=["postgres", "mariadb"])
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue(request.param)


def _run_agent(tmp_path: Path, server: Server, database: dict, sqls: list[str]) -> tuple:
    """One run of the built-in agent whose scripted model sends `sqls` as `execute_sql`
    calls; the run and the tool results the model read."""
    with ScriptedServer("openai") as model:
        root = write_suite(
            tmp_path / "suite",
            cases={"q": "How many orders are there?"},
            providers=[{"provider": "openai", "base_url": model.base_url}],
            dbt=False,
        )
        config = yaml.safe_load((root / "eval_config.yaml").read_text())
        del config["warehouse"]
        config["databases"] = [{"name": "shop", "type": server.kind, "url": server.url, **database}]
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config))
        suite = load_suite(root)
        model.script(
            tool_calls(*(execute_sql(sql) for sql in sqls)),
            tool_calls(execute_sql("SELECT count(*) AS n FROM orders")),
            answer("There are 5 orders."),
        )

        async def go() -> AgentRun:
            async with open_factory(suite) as factory:
                agent = factory.agent("openai:gpt-4.1")
                return await execute_run(
                    request_for(suite.case("q"), "openai:gpt-4.1", context=factory.context), agent
                )

        run = asyncio.run(go())
        results = [result for _, _, _, result in exchanges(model.requests[-1], "openai")]
    return run, results


class _Bystander:
    """Another session of the same role, open while the payloads run: it must survive."""

    def __init__(self, server: Server) -> None:
        self.server = server
        if server.kind == "postgres":
            self.connection = psycopg.connect(server.url, autocommit=True)
        else:
            self.connection = mysql_connection(server)

    def answers(self) -> bool:
        try:
            if self.server.kind == "postgres":
                return self.connection.execute("SELECT 1").fetchone() == (1,)
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT IS_FREE_LOCK('eval-hostile')")
                return cursor.fetchone() == (1,)  # and no lock was taken
        except Exception:
            return False

    def close(self) -> None:
        self.connection.close()


@pytest.mark.parametrize("role", ["read-only role", "owner, allow_privileged_role"])
def test_every_hostile_payload_is_refused_as_a_tool_error_and_touches_nothing(
    tmp_path, server, role
):
    path = Path(f"/tmp/eval-hostile-{uuid.uuid4().hex}")
    payloads = POSTGRES_PAYLOADS if server.kind == "postgres" else MYSQL_PAYLOADS
    sqls = [p.format(path=path) for p in payloads]
    who, database = server, {}
    if role != "read-only role":
        who, database = server.owner, {"allow_privileged_role": True}
    bystander = _Bystander(server)
    try:
        run, results = _run_agent(tmp_path, who, database, sqls)
        assert bystander.answers(), "another session was ended, or a lock taken"
    finally:
        bystander.close()
    assert run.status is RunStatus.COMPLETED, run.error
    for sql, result in zip(sqls, results, strict=False):
        assert result.startswith("Error:"), (sql, result)
        assert any(words in result for words in REFUSALS), (sql, result)
    assert results[len(sqls)].startswith("n\n5")  # and the next query works
    assert PASSWD not in json.dumps(run.to_dict(), default=str)
    assert not path.exists()


@pytest.mark.parametrize("mode", COMBINATION_SQL_MODES)
@pytest.mark.parametrize("role", ["read-only role", "owner, allow_privileged_role"])
def test_a_server_in_an_ansi_sql_mode_reads_a_quoted_payload_as_the_check_does(
    tmp_path, mariadb, role, mode
):
    path = Path(f"/tmp/eval-hostile-{uuid.uuid4().hex}")
    sqls = [p.format(path=path) for p in ANSI_QUOTED_PAYLOADS]
    # A statement that would set the mode for itself is no read.
    sqls.append("SET STATEMENT sql_mode='ANSI' FOR " + sqls[1])
    who, database = mariadb, {}
    if role != "read-only role":
        who, database = mariadb.owner, {"allow_privileged_role": True}
    with global_sql_mode(mariadb, mode):
        run, results = _run_agent(tmp_path, who, database, sqls)
    assert run.status is RunStatus.COMPLETED, run.error
    # One string to the server as to the check: a column named by it (quoted as CSV is).
    for sql, result in zip(sqls[:3], results, strict=False):
        assert result.startswith('"a""'), (sql, result)
    assert results[3].startswith("Error:") and "SET is not allowed" in results[3], results[3]
    assert results[4].startswith("n\n5")
    assert PASSWD not in json.dumps(run.to_dict(), default=str)
    assert not path.exists()


def test_a_session_whose_sql_mode_changes_under_it_runs_no_statement(mariadb):
    from eval_pipeline.warehouses import ConnectionFailed

    connection = connect(database_of(mariadb))
    try:
        # As something between the sandbox and the server replaying another session's
        # variables would: the check's reading of quotes no longer holds.
        with connection._connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_mode = 'ANSI'")
        with pytest.raises(ConnectionFailed, match=r"keeps sql_mode .*ANSI_QUOTES"):
            connection.begin_read_only(5)
        assert connection.broken
    finally:
        connection.close()


def test_a_privileged_role_is_refused_before_any_statement_with_the_read_only_recipe(server):
    owner = database_of(server.owner)
    with pytest.raises(PrivilegedRole) as refused:
        connect(owner)
    message = refused.value.message
    if server.kind == "postgres":
        assert "superuser" in message
        assert "CREATE ROLE eval_reader LOGIN" in message
        assert "GRANT SELECT ON ALL TABLES IN SCHEMA public TO eval_reader" in message
    else:
        assert "FILE ON *.*" in message or "ALL PRIVILEGES ON *.*" in message
        assert "GRANT SELECT, SHOW VIEW ON shop.* TO 'eval_reader'@'%'" in message
    assert "allow_privileged_role: true" in message
    assert server.owner.password not in message
    # `eval-pipeline test` reports it as a configuration mistake, before any agent runs.
    assert database_warnings([owner]) == [message]
    # The read-only role passes; the owner passes with the opt-out, which is warned about.
    connect(database_of(server)).close()
    connect(database_of(server.owner, allow_privileged_role=True)).close()


def test_the_servers_own_volatility_marks_decide_for_the_warehouses_functions(postgres):
    from eval_pipeline.sandbox import ForbiddenStatement, ServerSandbox

    made = [
        "CREATE FUNCTION eval_double(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2'",
        "CREATE FUNCTION eval_touch(int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1'",
        "CREATE FUNCTION eval_add(int, int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT $1 + $2'",
        "CREATE OPERATOR === (FUNCTION = eval_add, LEFTARG = int, RIGHTARG = int)",
    ]
    with psycopg.connect(postgres.owner.url, autocommit=True) as admin:
        for statement in made:
            admin.execute(statement)
        try:
            with ServerSandbox(database_of(postgres)) as sandbox:
                assert sandbox.execute("SELECT eval_double(21) AS n").rows == [(42,)]
                for sql, said in (
                    ("SELECT eval_touch(1)", "The function eval_touch is not allowed"),
                    ("SELECT public.eval_touch(1)", "The function public.eval_touch"),
                    ("SELECT 1 === 2", "The operator === is not allowed"),
                    ("SELECT no_such_function(1)", "The function no_such_function"),
                ):
                    with pytest.raises(ForbiddenStatement, match=re.escape(said)):
                        sandbox.execute(sql)
        finally:
            admin.execute("DROP OPERATOR === (int, int)")
            for name in ("eval_add(int, int)", "eval_touch(int)", "eval_double(int)"):
                admin.execute(f"DROP FUNCTION {name}")

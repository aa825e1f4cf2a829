"""A database URL without a password is no secret: nothing of it is blanked, and every planned run is counted.

A real PostgreSQL 15 lets the role `app` in with trust authentication (as `.pgpass` or IAM
auth do: the URL carries no password). Through the real `eval-pipeline test`, in our layout
(`url: {{ env('…') }}`) and in a nao project (`database: {{ env('NAO_DB') }}`), the failing
test named after the database keeps its name and its grade, the stored SQL and the dialect
read as written, and the summary says 0/1 passed with exit 1.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
import yaml

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.warehouses.servers import Server, postgres_missing, postgres_server

pytestmark = pytest.mark.slow

TEST = "analytics_total"
PROMPT = "What is the total amount of all orders?"
REFERENCE = "SELECT SUM(amount) AS total FROM analytics.orders"
WRONG = "SELECT MAX(amount) AS total FROM analytics.orders"  # the agent's answer: 80, not 132.75


def agent(request: RecordedRequest, _index: int) -> Step:
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    return tool_calls(execute_sql(WRONG)) if turn == 0 else answer("The total is 80.")


@pytest.fixture(scope="module")
def analytics() -> Iterator[Server]:
    """A server with database `analytics` (schema `analytics`, table `orders`) and a read-only
    role `app` that logs in from 127.0.0.1 with no password (trust)."""
    if reason := postgres_missing():
        pytest.skip(reason)
    with postgres_server() as server:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE analytics")
            admin.execute("CREATE ROLE app LOGIN")
            admin.execute("REVOKE TEMP ON DATABASE analytics FROM PUBLIC")
        owner_url = server.url.rsplit("/", 1)[0] + "/analytics"
        with psycopg.connect(owner_url, autocommit=True) as owner:
            owner.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            owner.execute("CREATE SCHEMA analytics")
            owner.execute("CREATE TABLE analytics.orders (id integer, amount numeric(10, 2))")
            owner.execute("INSERT INTO analytics.orders VALUES (1, 10.5), (2, 80), (3, 42.25)")
            owner.execute("GRANT USAGE ON SCHEMA analytics TO app")
            owner.execute("GRANT SELECT ON analytics.orders TO app")
            hba = server.folder / "data" / "pg_hba.conf"
            hba.write_text(f"host all app 127.0.0.1/32 trust\n{hba.read_text()}")
            owner.execute("SELECT pg_reload_conf()")
        yield server


def passwordless_url(server: Server) -> str:
    return f"postgresql://app@{server.host}:{server.port}/analytics"


def run(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "test",
        "--date",
        DAY,
        "--format",
        "json",
        "-m",
        "local:agent",
        cwd=root,
        env={**cli_env(), **env},
    )


def assert_one_failed_run_named_as_written(root: Path, result) -> None:
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[redacted]" not in result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert [(r["name"], r["status"]) for r in document["results"]] == [(TEST, "failed")]
    assert (document["summary"]["total"], document["summary"]["passed"]) == (1, 0)
    (call,) = document["results"][0]["details"]["tool_calls"]
    assert call["args"]["sql_query"] == WRONG
    assert call["result"]["dialect"] == "postgres"
    with duckdb.connect(str(root / ".eval" / "results.duckdb"), read_only=True) as store:
        store.execute("SET file_search_path = ?", [str(root / ".eval")])
        names = store.execute("SELECT DISTINCT name FROM grades").fetchall()
        queries = store.execute("SELECT queries FROM agent_runs").fetchone()[0]
    assert names == [(TEST,)]
    assert WRONG in queries


def test_a_url_without_a_password_keeps_every_name_and_count(analytics, tmp_path):
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / f"{TEST}.yml").write_text(
        yaml.safe_dump({"name": TEST, "prompt": PROMPT, "sql": REFERENCE}), encoding="utf-8"
    )
    with ScriptedServer("openai", script=agent) as server:
        config = {
            "test": {"models": ["local:agent"], "extraction": "last_query"},
            "databases": [
                {"name": "analytics", "type": "postgres", "url": "{{ env('ANALYTICS_URL') }}"}
            ],
            "llm": {"providers": [{"provider": "local", "base_url": server.base_url}]},
        }
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        result = run(root, {"ANALYTICS_URL": passwordless_url(analytics)})
    assert_one_failed_run_named_as_written(root, result)


def test_a_nao_project_with_its_database_name_from_the_environment(analytics, tmp_path):
    root = tmp_path / "shop"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / f"{TEST}.yml").write_text(
        f"name: {TEST}\nprompt: {PROMPT}\nsql: {REFERENCE}\n", encoding="utf-8"
    )
    with ScriptedServer("openai", script=agent) as server:
        (root / "nao_config.yaml").write_text(
            textwrap.dedent(
                f"""\
                project_name: shop
                databases:
                  - name: analytics
                    type: postgres
                    host: {analytics.host}
                    port: {analytics.port}
                    user: app
                    database: "{{{{ env('NAO_DB') }}}}"
                llm:
                  providers:
                    - provider: openaiCompatible/local
                      base_url: {server.base_url}
                      api_key: none
                      models:
                        - id: agent
                test:
                  models:
                    - openaiCompatible/local:agent
                """
            ),
            encoding="utf-8",
        )
        (root / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        result = run(root, {"NAO_DB": "analytics"})
    assert_one_failed_run_named_as_written(root, result)

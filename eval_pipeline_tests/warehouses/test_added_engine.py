"""A warehouse engine added from outside the package: one file, found through an entry point, used end to end.

The toy engine (SQLite, `sqlite_engine.py`) is declared the way a package of its own would
declare it, in a dist-info folder on the path of the real `eval-pipeline test`; a suite
whose database is a SQLite file then runs its reference and its agent's queries on it. An
engine registered without statement rules is refused by name before anything runs, where
it was read by MySQL's rules before.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline.sandbox import SandboxLimits, open_sandbox
from eval_pipeline.suite import ENGINES_GROUP, DatabaseConfig, register_engine, unregister_engine
from eval_pipeline.warehouses import ConnectionFailed
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    system_text,
    tool_calls,
)
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli, run_cli_subprocess
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.warehouses import sqlite_engine

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PRODUCT = REPO / "eval_pipeline"
REFERENCE = "SELECT status, COUNT(*) AS orders FROM orders GROUP BY status ORDER BY status"
# Backquotes and a `#` comment: MySQL's reading of a statement, which SQLite's is not.
MYSQL_ONLY = "SELECT `status` # a MySQL comment\nFROM orders"


def agent(request: RecordedRequest, _index: int) -> Step:
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    return tool_calls(execute_sql(REFERENCE)) if turn == 0 else answer("2 shipped, 1 new.")


def shop_suite(root: Path, engine: str, base_url: str) -> Path:
    (root / "cases").mkdir(parents=True)
    with sqlite3.connect(root / "shop.sqlite") as db:
        db.execute("CREATE TABLE orders (id INTEGER, amount REAL, status TEXT)")
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(1, 10.5, "shipped"), (2, 80.0, "new"), (3, 42.25, "shipped")],
        )
    (root / "cases" / "by_status.yml").write_text(
        yaml.safe_dump({"name": "by_status", "prompt": "Orders by status?", "sql": REFERENCE})
    )
    config = {
        "test": {"models": ["local:agent"], "extraction": "last_query"},
        "databases": [{"name": "shop", "type": engine, "path": "shop.sqlite"}],
        "llm": {"providers": [{"provider": "local", "base_url": base_url}]},
    }
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return root


def declared_by_a_package(site: Path) -> Path:
    """What pip writes for a package declaring the toy engine in its pyproject.toml:
    `[project.entry-points."eval_pipeline.engines"] sqlite = "…sqlite_engine:ENGINE"`."""
    info = site / "toy_sqlite_engine-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-sqlite-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENGINES_GROUP}]\nsqlite = eval_pipeline_tests.warehouses.sqlite_engine:ENGINE\n"
    )
    return site


def test_an_engine_from_an_entry_point_runs_a_suite_through_the_real_command(tmp_path):
    site = declared_by_a_package(tmp_path / "site")
    with ScriptedServer("openai", script=agent) as server:
        root = shop_suite(tmp_path / "suite", "sqlite", server.base_url)
        result = run_cli_subprocess(
            *("test", "--date", DAY, "--format", "json", "-m", "local:agent"),
            cwd=root,
            env={**cli_env(), "PYTHONPATH": f"{site}:{REPO}"},
        )
        requests = list(server.requests)
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert [(r["name"], r["status"]) for r in document["results"]] == [("by_status", "passed")]
    (call,) = document["results"][0]["details"]["tool_calls"]
    assert call["result"]["dialect"] == "sqlite"
    told = system_text(requests[0], "openai")  # the agent is told its engine and its tables
    assert "SQLite" in told
    assert "orders" in told

    # What adding it took: one file holds the whole engine, and no product module names it.
    parts = (sqlite_engine.ENGINE.connect, sqlite_engine.ENGINE.reading_statement)
    assert {inspect.getsourcefile(part) for part in parts} == {sqlite_engine.__file__}
    # Its name as a string, as a dispatch would spell it (Dagster's own SQLite storage and the
    # stdlib module are not the engine)
    names_it = re.compile(r"[\"']sqlite[\"']")
    naming = [p for p in PRODUCT.rglob("*.py") if names_it.search(p.read_text(encoding="utf-8"))]
    assert naming == []


@pytest.fixture
def engine_without_rules() -> Iterator[str]:
    engine = dataclasses.replace(sqlite_engine.ENGINE, name="norules", reading_statement=None)
    register_engine(engine)
    yield engine.name
    unregister_engine(engine.name)


def test_an_engine_without_statement_rules_is_refused_never_read_by_mysql_rules(
    engine_without_rules, tmp_path
):
    with ScriptedServer("openai", script=agent) as server:
        root = shop_suite(tmp_path / "suite", engine_without_rules, server.base_url)
        database = DatabaseConfig("shop", engine_without_rules, path=root / "shop.sqlite")
        with pytest.raises(ConnectionFailed) as refused:
            open_sandbox(database, SandboxLimits()).execute(MYSQL_ONLY)
        result = run_cli("test", "--date", DAY, "-m", "local:agent", cwd=root)
        asked = list(server.requests)
    assert refused.value.message == (
        "database 'shop' (norules): the SQLite engine gives the SQL sandbox no statement "
        "rules (its Engine.reading_statement is None), so no SQL is run on it; give the "
        "engine rules that read a statement as its server does (docs/extending.md)"
    )
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert refused.value.message in " ".join(result.stderr.split())
    assert asked == []  # no agent was asked anything

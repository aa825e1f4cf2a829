"""Through the real CLI, no piece of an agent's token reaches any file, export or output.

The agent echoes pieces of its own bearer token, cut as a display would cut them
("…AAAAsk-REDTEAM-OPEN", "sk-REDTEA…"), in its reply, its SQL, its answer cells and a
refusal; after `eval-pipeline test` and both exports, no 8-character piece of the token
is in the store, the journal, the results file, the report, the Dagster run database,
the exports or anything printed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from eval_pipeline.suite import MIN_PIECE
from eval_pipeline_tests.agents.servers import ScriptedServer, agent_reply, error
from eval_pipeline_tests.cli import console

pytestmark = pytest.mark.slow

DAY = "2026-01-01"
TOKEN = "sk-REDTEAM-OPEN-9f3c71d2e8b4AAAA"
HEAD, TAIL = TOKEN[:9], TOKEN[-19:]  # "sk-REDTEA", "OPEN-9f3c71d2e8b4AAAA"


def pieces(secret: str) -> set[str]:
    return {secret[i : i + MIN_PIECE] for i in range(len(secret) - MIN_PIECE + 1)}


def script(request, _index):
    test = request.json.get("test")
    if test == "refused":
        return error(401, f"token …{TAIL} is not valid")
    cut = f"…AAAA{TOKEN[:15]}"  # what a cut display of "…AAAA" + the key would leave
    return agent_reply(
        f"Revenue is 252.75. Debug: {HEAD}… and {cut}",
        queries=[
            {
                "id": "q1",
                "sql": f"SELECT 252.75 AS revenue -- {TAIL}",
                "columns": ["revenue"],
                "rows": [[252.75]],
            }
        ],
        answer={"columns": ["revenue", "note"], "rows": [[252.75, f"{HEAD}…"]]},
        tool_calls=[{"name": "execute_sql", "arguments": {"sql_query": f"-- {cut}"}, "result": {}}],
    )


@pytest.fixture
def suite(tmp_path: Path):
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    with duckdb.connect(str(root / "warehouse.duckdb")) as connection:
        connection.execute("CREATE TABLE orders AS SELECT 252.75 AS amount")
    with ScriptedServer("agent", script=script) as server:
        config = {
            "test": {"models": ["http:bot"], "extraction": "last_query"},
            "warehouse": {"type": "duckdb", "path": "warehouse.duckdb"},
            "agents": [
                {
                    "name": "bot",
                    "url": server.base_url,
                    "headers": {"Authorization": "Bearer {{ env('EVAL_TEST_BOT_TOKEN') }}"},
                    "timeout_s": 10,
                }
            ],
        }
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        for name in ("echoes", "refused"):
            (root / "cases" / f"{name}.yml").write_text(
                f"prompt: What is the revenue?\nsql: SELECT SUM(amount) AS revenue FROM orders\n"
                f"name: {name}\n"
            )
        yield root, server


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DAGSTER_HOME", "EVAL_SUITE_DIR"}}
    env["EVAL_TEST_BOT_TOKEN"] = TOKEN
    return console.run_cli(*args, cwd=cwd, env=env)


def readable(path: Path) -> str:
    """What a file holds: its bytes, and for Parquet (compressed) its values."""
    text = path.read_bytes().decode("latin-1")
    if path.suffix == ".parquet":
        text += json.dumps(pq.read_table(path).to_pylist(), default=str, ensure_ascii=False)
    return text


def test_no_piece_of_the_token_is_stored_exported_or_printed(suite, tmp_path):
    root, server = suite
    result = run_cli("test", "--date", DAY, cwd=root)
    assert result.returncode in (0, 1, 3), result.stderr  # 3: the agent's refusals are errors
    assert "Traceback" not in result.stderr
    # the token was sent, and the agent really echoed pieces of it
    assert server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    csv_export = tmp_path / "export.csv"
    html_export = tmp_path / "export.html"
    outputs = [result.stdout, result.stderr]
    for fmt, path in (("csv", csv_export), ("html", html_export)):
        exported = run_cli("export", "--date", DAY, "--format", fmt, "-o", str(path), cwd=root)
        assert exported.returncode == 0, exported.stderr
        outputs += [exported.stdout, exported.stderr]
    shown = run_cli("sql", "SELECT name, status, message FROM grades", "--format", "csv", cwd=root)
    outputs.append(shown.stdout)
    assert "refused" in shown.stdout and "[redacted]" in shown.stdout

    files = [p for p in root.rglob("*") if p.is_file() and p.name != "eval_config.yaml"]
    files += [csv_export, html_export]
    names = {p.relative_to(root).as_posix() for p in files if p.is_relative_to(root)}
    for expected in ("agent_runs/", "grades/", "dagster_home/", "outputs/results_", "reports/"):
        assert any(expected in name for name in names), (expected, sorted(names))
    assert any(name.endswith((".db", ".sqlite")) for name in names), sorted(names)
    leaks = sorted(
        {(str(path), piece) for path in files for piece in pieces(TOKEN) if piece in readable(path)}
        | {("output", piece) for text in outputs for piece in pieces(TOKEN) if piece in text}
    )
    assert leaks == []

"""`eval-pipeline init` through the real console script, as a newcomer with a DuckDB file runs it:
init, then `list` and `test` in that folder with no --suite.

No environment variable points the `openai` provider elsewhere (it talks to api.openai.com),
so the run on a model goes to a scripted OpenAI-compatible server through an explicit
`base_url`; that `openai` with no `llm` block reads OPENAI_API_KEY is shown by the run that
stops for the unset key (and at the config level in suite/test_config.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import duckdb
import pytest

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli

pytestmark = pytest.mark.slow

REFERENCE = "SELECT COUNT(*) AS row_count FROM orders"


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = run_cli(*args, cwd=cwd, env=env if env is not None else without_keys())
    no_traceback(result)
    return result


def without_keys() -> dict[str, str]:
    return {k: v for k, v in cli_env().items() if not k.endswith("_API_KEY")}


def shop(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(folder / "shop.duckdb")) as connection:
        connection.execute(
            "CREATE TABLE orders AS SELECT * FROM (VALUES (1, 'ada', 120.5), (2, 'bo', 80.0), "
            "(3, 'bo', 42.25), (4, 'cy', 10.0)) t(order_id, customer, amount)"
        )
    return folder


def agent_then_extraction(request: RecordedRequest, _index: int) -> Step:
    """The built-in agent (gpt-4.1) counts the rows and says so; the extraction model
    (the judge, gpt-4.1-mini) selects the count from the table of the agent's query."""
    if request.json.get("model") == "gpt-4.1-mini":
        text = "\n".join(str(m.get("content")) for m in request.messages)
        table = re.search(r"Table (\w+) \(", text)
        assert table, text
        return answer(f"```sql\nSELECT row_count FROM {table.group(1)}\n```")
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    if turn == 0:
        return tool_calls(execute_sql(REFERENCE))
    return answer("The orders table has 4 rows.")


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    folder = shop(tmp_path_factory.mktemp("init") / "newcomer")
    return folder, run("init", cwd=folder)


def test_init_writes_the_suite_and_prints_the_next_command(started):
    folder, result = started
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "wrote eval_config.yaml",
        "wrote cases/orders_row_count.yml",
        "wrote RULES.md",
        "wrote .gitignore",
    ]
    assert "its reference SQL ran read-only on the warehouse (row_count = 4)" in result.stdout
    assert lines[-2:] == ["  export OPENAI_API_KEY=...", "  eval-pipeline test"]
    assert sorted(p.name for p in folder.iterdir()) == [
        ".gitignore",
        "RULES.md",
        "cases",
        "eval_config.yaml",
        "shop.duckdb",
    ]


def test_list_accepts_the_new_suite_without_suite_option(started):
    folder, _ = started
    result = run("list", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^orders_row_count\s+data\s+starter$", result.stdout, re.MULTILINE)
    assert f"1 test(s) in {folder / 'cases'}" in result.stdout


def test_test_reads_openai_s_key_from_the_environment_with_no_llm_block(started):
    folder, _ = started
    result = run("test", cwd=folder)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "environment variable OPENAI_API_KEY is not set; openai:gpt-4.1 (test.models)" in (
        result.stderr
    )
    assert "not under llm.providers" not in result.stderr


def test_init_again_refuses_and_names_the_file(started):
    folder, _ = started
    config = (folder / "eval_config.yaml").read_text()
    result = run("init", cwd=folder)
    assert result.returncode == 2
    assert f"{folder / 'eval_config.yaml'}: already exists" in result.stderr
    assert (folder / "eval_config.yaml").read_text() == config


def test_test_runs_the_new_suite_end_to_end(started, tmp_path):
    folder, _ = started
    with ScriptedServer("openai", script=agent_then_extraction) as server:
        config = folder / "eval_config.yaml"
        written = config.read_text()
        # The only edit: openai declared with a base_url (the scripted server), the key still
        # read from OPENAI_API_KEY.
        config.write_text(
            written
            + "llm:\n  providers:\n    - provider: openai\n"
            + f"      base_url: {server.base_url}\n"
            + "      api_key: \"{{ env('OPENAI_API_KEY') }}\"\n"
        )
        try:
            result = run(
                "test", cwd=folder, env={**without_keys(), "OPENAI_API_KEY": "sk-scripted-1234"}
            )
        finally:
            config.write_text(written)
        authorizations = {r.headers.get("authorization") for r in server.requests}
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1/1 passed (100.0%)" in result.stdout, result.stdout
    assert authorizations == {"Bearer sk-scripted-1234"}
    assert (folder / ".eval").is_dir() and (folder / "outputs").is_dir()


def test_a_server_url_s_password_stays_out_of_the_file_and_the_output(postgres, tmp_path):
    result = run("init", "suite", "--url", postgres.url, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    config = (tmp_path / "suite" / "eval_config.yaml").read_text()
    assert "url: \"{{ env('WAREHOUSE_URL') }}\"" in config and "type: postgres" in config
    for text in (config, result.stdout, result.stderr):
        assert postgres.password not in text
    assert "URL read from WAREHOUSE_URL" in result.stdout
    assert "export WAREHOUSE_URL=" in result.stdout
    assert result.stdout.splitlines()[-1] == "  cd suite && eval-pipeline test"
    listed = run("list", "--suite", "suite", cwd=tmp_path)
    assert listed.returncode == 0 and "1 test(s)" in listed.stdout, listed.stderr

"""`eval-pipeline sql` given what the prompt takes: a dot-command, or several statements on a line.

The statements run one after the other, each through the read-only sandbox on its own, so a
line of reading queries prints each result and a writing statement among them is still refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.console import no_traceback, run_cli, run_cli_subprocess
from eval_pipeline_tests.cli.replay_suite import DAY, write_suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_suite(tmp_path_factory.mktemp("sql_statements") / "suite")
    done = run_cli("test", "--date", DAY, "-q", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_a_dot_command_runs_as_an_argument_as_at_the_prompt(suite):
    tables = run_cli("sql", ".tables", "--format", "json", cwd=suite)

    no_traceback(tables)
    assert tables.returncode == 0, tables.stderr
    names = [row["name"] for row in json.loads(tables.stdout)]
    assert {"grades", "agent_runs", "model_summaries"} <= set(names)
    helped = run_cli("sql", ".help", cwd=suite)
    assert helped.returncode == 0 and ".tables   the tables and views" in helped.stdout
    unknown = run_cli("sql", ".schema", cwd=suite)
    assert unknown.returncode == 2
    assert unknown.stderr == "error: unknown command .schema; .help lists them\n"


def test_reading_statements_on_one_line_run_one_after_the_other(suite):
    done = run_cli(
        "sql",
        "SELECT count(*) AS runs FROM grades; SELECT 'a;b' AS text -- a ; in a comment\n;",
        "--format",
        "csv",
        cwd=suite,
    )

    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["runs", "4", "text", "a;b"]  # CSV ends rows in \r\n


def test_a_writing_statement_among_them_is_refused_and_writes_nothing(suite, tmp_path):
    leak = tmp_path / "leak.csv"

    done = run_cli("sql", f"SELECT 1 AS one; COPY grades TO '{leak}'", "--format", "csv", cwd=suite)

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["one", "1"]
    assert done.stderr.startswith("error: only queries run here") and "not COPY" in done.stderr
    assert not leak.exists()


def test_the_prompt_runs_two_statements_typed_on_one_line(suite):
    done = run_cli_subprocess(
        "sql", "--format", "csv", cwd=suite, input="SELECT 1 AS a; SELECT 2 AS b;\n.tables\n"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("a\n1\nb\n2\nname\n"), done.stdout

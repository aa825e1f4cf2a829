"""A suite moved to another folder while someone holds its old results.duckdb open read-only:
the next `eval-pipeline test` still runs (results.duckdb's views cannot be rewritten until that
reader closes, so the pipeline reads the store through views of its own meanwhile)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.test_cli_test_command import DAY, NEXT_DAY, run_cli, write_suite

pytestmark = pytest.mark.slow


def test_a_moved_suite_runs_while_a_reader_holds_its_results_database(tmp_path: Path):
    before = write_suite(tmp_path / "before")
    assert run_cli("test", "--date", DAY, cwd=before).returncode == 0
    after = tmp_path / "after"
    shutil.move(before, after)

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import duckdb, sys, time
                con = duckdb.connect({str(after / ".eval" / "results.duckdb")!r}, read_only=True)
                print("open", flush=True)
                sys.stdin.read()  # held until the test closes our stdin
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        done = run_cli("test", "--date", NEXT_DAY, cwd=after)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "results.duckdb is held open" in done.stderr
        day = run_cli("sql", "SELECT count(*) AS n FROM grades", "--format", "json", cwd=after)
        assert day.returncode == 0, day.stderr
        assert json.loads(day.stdout)[0]["n"] == 8  # both days' four grades, read in the new folder
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # Once the reader is gone, results.duckdb itself follows the move.
    closed = run_cli("sql", "SELECT count(*) AS n FROM grades", "--format", "json", cwd=after)
    assert json.loads(closed.stdout)[0]["n"] == 8
    assert "held open" not in closed.stderr

"""A suite copied or moved to another folder: its results.duckdb reads at once, from any folder
(it holds the tables, not paths to the Parquet files), and evaluations go on while a reader
holds it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, NEXT_DAY, write_suite

pytestmark = pytest.mark.slow

COUNT_GRADES = textwrap.dedent(
    """
    import sys, duckdb
    with duckdb.connect(sys.argv[1], read_only=True) as connection:
        print(connection.execute("SELECT count(*) FROM grades").fetchone()[0])
    """
)


def _count_grades(database: str, *, cwd: Path) -> subprocess.CompletedProcess:
    """A person's Python session counting grades in results.duckdb, nothing else run first."""
    return subprocess.run(
        [sys.executable, "-c", COUNT_GRADES, database],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def copied_and_moved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One suite evaluated once, then copied, then moved (nothing is left at the folder it was
    evaluated in): the copy and the moved suite, each read or evaluated by one test."""
    tmp = tmp_path_factory.mktemp("moved")
    original = write_suite(tmp / "original")
    assert run_cli("test", "--date", DAY, cwd=original).returncode == 0
    copy = tmp / "copy"
    shutil.copytree(original, copy)
    moved = tmp / "moved"
    shutil.move(original, moved)  # nothing may still read the old folder
    assert not original.exists()
    return copy, moved


def test_a_copied_suite_reads_its_results_at_once(copied_and_moved, tmp_path: Path):
    copy, _ = copied_and_moved
    database = copy / ".eval" / "results.duckdb"
    written = database.read_bytes(), (copy / ".eval" / "results.published.json").read_text()

    # From the copy's state folder, from the suite's folder and from any other.
    for cwd, path in (
        (copy / ".eval", "results.duckdb"),
        (copy, ".eval/results.duckdb"),
        (tmp_path, str(database)),
    ):
        counted = _count_grades(path, cwd=cwd)
        assert (counted.returncode, counted.stdout.strip()) == (0, "4"), (cwd, counted.stderr)

    result = run_cli("sql", "SELECT count(*) AS n FROM grades", "--format", "json", cwd=copy)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["n"] == 4
    # The file was current as copied: nothing was published again.
    after = database.read_bytes(), (copy / ".eval" / "results.published.json").read_text()
    assert after == written


def test_a_moved_suite_runs_while_a_reader_holds_its_results_database(
    copied_and_moved, tmp_path: Path
):
    _, after = copied_and_moved
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
        day = run_cli("sql", "SELECT count(*) AS n FROM grades", "--format", "json", cwd=after)
        assert day.returncode == 0, day.stderr
        assert json.loads(day.stdout)[0]["n"] == 8  # both days' four grades, read in the new folder
        # The evaluation published a new file over the held one: a new session sees both days.
        counted = _count_grades(str(after / ".eval" / "results.duckdb"), cwd=tmp_path)
        assert (counted.returncode, counted.stdout.strip()) == (0, "8"), counted.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)

"""A damaged Parquet file in the store, through the real `eval-pipeline` console script: it is
reported once, set aside, everything else keeps working, and a rerun of its partition mends it."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.store import NotReadOnly, StateFolder, fetch_read_only
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, NEXT_DAY, write_suite

pytestmark = pytest.mark.slow

WARNING = "damaged store file set aside"


def grades_files(root: Path, day: str) -> list[Path]:
    return sorted((root / ".eval" / "store" / "grades" / f"date={day}").rglob("*.parquet"))


@pytest.fixture(scope="module")
def damaged_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A suite graded on DAY whose grades file for DAY is then overwritten with garbage."""
    root = write_suite(tmp_path_factory.mktemp("damaged") / "suite")
    first = run_cli("test", "--date", DAY, cwd=root)
    assert first.returncode == 0, first.stderr
    (damaged,) = grades_files(root, DAY)
    damaged.write_bytes(b"this is not a parquet file" * 100)
    return root


def test_a_damaged_file_is_set_aside_once_and_the_rest_keeps_working(damaged_suite: Path):
    root = damaged_suite
    other_day = run_cli("test", "--date", NEXT_DAY, cwd=root)
    assert other_day.returncode == 0, other_day.stderr
    assert "Traceback" not in other_day.stderr
    warnings = [line for line in other_day.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1, other_day.stderr
    assert "table grades, partition date=2026-01-01/model=replay%3Agood" in warnings[0]
    assert grades_files(root, DAY) == []  # moved out of the store…
    quarantined = list((root / ".eval" / "quarantine" / "grades").rglob("*.parquet"))
    assert len(quarantined) == 1  # …into the quarantine folder, bytes kept
    assert quarantined[0].read_bytes().startswith(b"this is not a parquet file")
    records = (root / ".eval" / "quarantine" / "records.jsonl").read_text().splitlines()
    assert json.loads(records[0])["table"] == "grades"

    # The day whose only grades file was set aside has no results left: diff says so (exit 2).
    gone = run_cli("diff", "--base", DAY, "--date", NEXT_DAY, cwd=root)
    assert gone.returncode == 2, gone.stdout + gone.stderr
    assert f"no results on {DAY} (--base); days with results: {NEXT_DAY}" in gone.stderr
    for command in (
        ("diff", "--date", NEXT_DAY),
        ("export", "--date", NEXT_DAY),
        ("export", "--format", "html", "--date", NEXT_DAY),
        ("sql", "SELECT count(*) AS n FROM grades", "--format", "json"),
    ):
        done = run_cli(*command, cwd=root)
        assert done.returncode in (0, 1), (command, done.stderr)  # diff: 1 means regressions
        assert "Traceback" not in done.stderr and WARNING not in done.stderr, command
    assert json.loads(done.stdout) == [{"n": 4}]  # the count: NEXT_DAY's four grades


def test_store_check_lists_the_partition_until_a_rerun_rewrites_it(damaged_suite: Path):
    root = damaged_suite
    if grades_files(root, DAY):  # not set aside yet (this test run alone): a read does it
        run_cli("sql", "SELECT count(*) FROM grades", cwd=root)
    check = run_cli("store", "check", cwd=root)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "to rerun: grades date=2026-01-01/model=replay%3Agood" in check.stdout

    rerun = run_cli("test", "--date", DAY, cwd=root)
    assert rerun.returncode == 0, rerun.stderr
    assert len(grades_files(root, DAY)) == 1
    check = run_cli("store", "check", cwd=root)
    assert check.returncode == 0, check.stdout
    assert "0 partition(s) to rerun" in check.stdout
    # What `eval-pipeline sql` reads (its query function): the day's four grades are back.
    day = fetch_read_only(
        StateFolder(root / ".eval"), f"SELECT count(*) AS n FROM grades WHERE run_date = '{DAY}'"
    )
    assert day == (["n"], [(4,)])


def test_store_check_finds_a_file_damaged_inside(damaged_suite: Path):
    """A file with intact footer but a broken page: only reading every page finds it."""
    root = damaged_suite
    (path,) = sorted(
        (root / ".eval" / "store" / "agent_runs" / f"date={NEXT_DAY}").rglob("*.parquet")
    )
    data = bytearray(path.read_bytes())
    data[4:54] = b"\xff" * 50  # the first page header
    path.write_bytes(bytes(data))
    check = run_cli("store", "check", cwd=root)
    assert check.returncode == 1
    assert f"damaged: store/agent_runs/date={NEXT_DAY}/" in check.stdout
    assert "table agent_runs" in check.stdout
    assert not path.exists()


def test_sql_runs_one_reading_statement_and_reaches_no_file(damaged_suite: Path, tmp_path: Path):
    """The command refuses a statement that writes a file with exit 2 and the reason; the
    other refusals, and a reading statement that is not a SELECT, are checked on the query
    function `eval-pipeline sql` prints the error of (`error: <reason>`, exit 2)."""
    root = damaged_suite
    outside = tmp_path / "leak.csv"
    done = run_cli("sql", f"COPY (SELECT * FROM grades) TO '{outside}'", cwd=root)
    assert done.returncode == 2, done.stdout
    assert "not COPY" in done.stderr and "Traceback" not in done.stderr, done.stderr
    layout = StateFolder(root / ".eval")
    for statement, said in (
        (f"COPY (SELECT 1) TO '{root}/.eval/store/grades/x.parquet'", "not COPY"),
        ("SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
        ("SELECT 1; SELECT 2", "give one SQL statement, not 2"),
        ("/* /* */ SELECT */ CREATE TABLE x (a INT)", "not CREATE"),
        ("SET enable_external_access = true", "not SET"),
    ):
        with pytest.raises((duckdb.Error, NotReadOnly)) as refused:
            fetch_read_only(layout, statement)
        assert said in str(refused.value), (statement, str(refused.value))
    assert not outside.exists()
    assert not (root / ".eval" / "store" / "grades" / "x.parquet").exists()
    columns, rows = fetch_read_only(layout, "SUMMARIZE model_summaries")
    assert "column_name" in columns and rows

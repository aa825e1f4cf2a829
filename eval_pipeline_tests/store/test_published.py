"""results.duckdb, the published copy of the store: it opens in any DuckDB client (older ones
too) from any folder, after the suite is copied or moved, never reads another suite's data, and
a publication never waits on, nor disturbs, a reader holding it open."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.store import (
    NotReadOnly,
    StateFolder,
    connect,
    fetch_read_only,
    head_read_only,
    publish_results,
    published_current,
    table_names,
    write_rows,
)
from eval_pipeline.store._locks import (  # the unit itself: publications racing each other
    next_publication,
    publishing_lock,
)
from eval_pipeline_tests.store.conftest import DAY, grade
from eval_pipeline_tests.store.older_duckdb import DuckDBCli


def write_day(layout: StateFolder, model: str, cases: int = 10) -> None:
    rows = [grade(f"case{i}", model, "passed" if i % 2 else "failed") for i in range(cases)]
    write_rows(layout, "grades", rows, model=model, run_date=DAY)


def count_in_python(database: Path | str, *, cwd: Path, env: dict | None = None) -> str:
    """`SELECT count(*) FROM grades` in a person's Python session started in `cwd`."""
    code = (
        f"import duckdb; c = duckdb.connect({str(database)!r}, read_only=True); "
        "print(c.execute('SELECT count(*) FROM grades').fetchone()[0])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_file_holds_every_table_of_the_surface_as_the_views_show_it(layout):
    write_day(layout, "m")
    write_day(layout, "m", cases=4)  # the partition's latest write: 4 rows, history 14
    assert not published_current(layout)
    assert publish_results(layout)
    assert published_current(layout) and not publish_results(layout)  # nothing new: kept
    beside = sorted(p.name for p in layout.root.iterdir() if p.name.startswith(".results.duckdb"))
    assert beside == [] and not (layout.root / "results.duckdb.wal").exists()  # nothing left
    with duckdb.connect(str(layout.database), read_only=True) as published, connect(layout) as live:
        tables = {row[0] for row in published.execute("SHOW TABLES").fetchall()}
        assert tables == set(table_names())
        for name in table_names():
            sql = f"SELECT * FROM {name} ORDER BY ALL"
            assert published.execute(sql).fetchall() == live.execute(sql).fetchall(), name
            assert (
                published.execute(f"DESCRIBE {name}").fetchall()
                == live.execute(f"DESCRIBE {name}").fetchall()
            )
        assert published.execute("SELECT count(*) FROM grades").fetchone()[0] == 4
        assert published.execute("SELECT count(*) FROM grades_history").fetchone()[0] == 14


@pytest.mark.slow  # subprocesses
def test_it_answers_from_any_folder(tmp_path, layout):
    write_day(layout, "m")
    publish_results(layout)
    suite = layout.root.parent
    elsewhere = tmp_path / "notebooks"
    elsewhere.mkdir()
    assert count_in_python(layout.database, cwd=elsewhere) == "10"
    assert count_in_python(".eval/results.duckdb", cwd=suite) == "10"  # the suite's folder
    assert count_in_python(f"{suite.name}/.eval/results.duckdb", cwd=suite.parent) == "10"


@pytest.mark.slow  # subprocesses
def test_a_copied_suite_reads_its_own_data_never_the_original(tmp_path):
    original = StateFolder(tmp_path / "suite" / ".eval")
    write_day(original, "m")
    publish_results(original)
    copy = StateFolder(shutil.copytree(tmp_path / "suite", tmp_path / "copy") / ".eval")
    # The original goes on; the copy shows what it was copied with.
    write_day(original, "n")
    publish_results(original)
    assert count_in_python(original.database, cwd=tmp_path) == "20"
    assert count_in_python(copy.database, cwd=tmp_path) == "10"
    assert published_current(copy)  # its file describes its own store
    # The copy's own evaluations publish into the copy, never into the original.
    write_day(copy, "c", cases=3)
    assert publish_results(copy)
    assert count_in_python(copy.database, cwd=tmp_path) == "13"
    assert count_in_python(original.database, cwd=tmp_path) == "20"
    # With the original gone, the copy still answers: nothing in it points there.
    shutil.rmtree(tmp_path / "suite")
    assert count_in_python(copy.database, cwd=copy.root) == "13"
    moved = tmp_path / "moved"
    (tmp_path / "copy").rename(moved)
    assert count_in_python(moved / ".eval" / "results.duckdb", cwd=tmp_path) == "13"


@pytest.mark.slow  # installs duckdb 1.0.0 from PyPI, subprocesses
def test_the_oldest_duckdb_it_promises_reads_the_file(tmp_path, layout, oldest_duckdb_python):
    write_day(layout, "m")
    publish_results(layout)
    version = subprocess.run(
        [sys.executable, "-c", "import duckdb; print(duckdb.__version__)"],
        capture_output=True, text=True, env=oldest_duckdb_python,
    )  # fmt: skip
    assert version.stdout.strip() == "1.0.0", version.stdout + version.stderr
    assert count_in_python(layout.database, cwd=tmp_path, env=oldest_duckdb_python) == "10"


@pytest.mark.slow  # installs duckdb-cli from PyPI, subprocesses
def test_an_older_duckdb_cli_reads_it_while_evaluations_publish(
    tmp_path, layout, older_duckdb_cli: DuckDBCli
):
    """The duckdb-cli wheel (1.5.6), a session held open and one-shot queries, from another
    folder, while a writer publishes again and again: no error, each answer a whole
    publication, and the open session keeps the snapshot it opened."""
    write_day(layout, "model-0")
    publish_results(layout)
    session = subprocess.Popen(
        [str(older_duckdb_cli.binary), "-readonly", "-csv", "-noheader", str(layout.database)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path,
    )  # fmt: skip
    assert session.stdin is not None and session.stdout is not None

    def session_count() -> str:
        session.stdin.write("SELECT count(*) FROM grades;\n")
        session.stdin.flush()
        return session.stdout.readline().strip()

    answers: list[str] = []
    errors: list[str] = []
    stop = threading.Event()

    def read_again_and_again() -> None:
        while not stop.is_set():
            result = older_duckdb_cli.run(
                layout.database, "SELECT count(*) FROM grades", cwd=tmp_path
            )
            if result.returncode != 0 or result.stderr:
                errors.append(result.stderr or f"exit {result.returncode}")
            answers.append(result.stdout.strip())

    reader = threading.Thread(target=read_again_and_again)
    try:
        assert session_count() == "10"
        reader.start()
        for model in range(1, 9):
            write_day(layout, f"model-{model}")
            assert publish_results(layout)  # never waits on, nor fails for, the readers
        stop.set()
        reader.join(timeout=120)
        assert session_count() == "10"  # the snapshot it opened, whole
    finally:
        stop.set()
        session.stdin.close()
        session.wait(timeout=30)
    assert not errors, errors[:3]
    assert len(answers) >= 2
    assert set(answers) <= {str(10 * n) for n in range(1, 10)}, answers
    assert [int(a) for a in answers] == sorted(int(a) for a in answers)
    final = older_duckdb_cli.run(layout.database, "SELECT count(*) FROM grades", cwd=tmp_path)
    assert final.stdout.strip() == "90", final.stderr


def test_sql_answers_from_the_file_when_current_and_from_the_files_when_not(layout):
    """`eval-pipeline sql` reads results.duckdb only while it holds the store as it is, and
    its sandbox holds on either path."""
    write_day(layout, "m")
    publish_results(layout)
    assert fetch_read_only(layout, "SELECT count(*) FROM grades") == (["count_star()"], [(10,)])
    write_day(layout, "n")  # written, not yet published
    assert not published_current(layout)
    assert fetch_read_only(layout, "SELECT count(*) FROM grades")[1] == [(20,)]
    for published in (False, True):
        if published:
            publish_results(layout)
        with pytest.raises(duckdb.Error, match=r"disabled|not allowed|Permission"):
            fetch_read_only(layout, "SELECT * FROM read_text('/etc/hostname')")
        with pytest.raises(duckdb.Error):
            fetch_read_only(layout, f"SELECT * FROM read_parquet('{layout.root.parent}/x.parquet')")


def test_a_head_is_the_first_rows_and_counts_them_all_on_either_path(layout):
    """What `eval-pipeline sql` shows as a table: only the rows shown are fetched."""
    write_day(layout, "m")
    sql = "SELECT name FROM grades ORDER BY name"
    for published in (False, True):
        if published:
            publish_results(layout)
        assert published_current(layout) == published
        columns, every_row = fetch_read_only(layout, sql)
        assert head_read_only(layout, sql, 3) == (columns, every_row[:3], 10)
        assert head_read_only(layout, sql, 10) == (columns, every_row, 10)
        assert head_read_only(layout, sql + " LIMIT 2", 3) == (columns, every_row[:2], 2)
        with pytest.raises(NotReadOnly):
            head_read_only(layout, "SELECT 1; SELECT 2", 3)


def test_a_caller_returns_at_once_when_a_publication_already_waits(layout):
    """Parallel evaluations (a backfill) do not queue a rebuild each: the one waiting reads
    the store once the current publication is done, so it holds every later caller's writes."""
    write_day(layout, "m")
    with publishing_lock(layout), next_publication(layout) as waiting:  # one runs, one waits
        assert waiting
        assert not publish_results(layout)
        assert not published_current(layout)
    assert publish_results(layout) and published_current(layout)

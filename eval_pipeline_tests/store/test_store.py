"""The Parquet store and its views: latest-per-partition views, history, journal, concurrency."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import duckdb
import pytest

from eval_pipeline.store import (
    JournaledPartition,
    StateFolder,
    ensure_database,
    fetch,
    journal_files,
    one_connection,
    query,
    read_journals,
    read_latest,
    write_rows,
)
from eval_pipeline.store._files import Journal  # the unit itself: journals written by hand
from eval_pipeline_tests.store.conftest import DAY, grade


def test_views_show_each_partitions_latest_write_and_history_keeps_all(layout):
    assert query(layout, "SELECT count(*) AS n FROM grades").n[0] == 0
    write_rows(
        layout,
        "grades",
        [grade("a", "openai:gpt-4.1", "failed")],
        model="openai:gpt-4.1",
        run_date=DAY,
    )
    write_rows(
        layout,
        "grades",
        [grade("a", "openai:gpt-4.1", "passed"), grade("b", "openai:gpt-4.1", "passed")],
        model="openai:gpt-4.1",
        run_date=DAY,
    )
    write_rows(
        layout,
        "grades",
        [grade("a", "anthropic:claude", "error")],
        model="anthropic:claude",
        run_date=DAY,
    )
    rows = query(layout, "SELECT name, model, status FROM grades ORDER BY model, name")
    assert rows.values.tolist() == [
        ["a", "anthropic:claude", "error"],
        ["a", "openai:gpt-4.1", "passed"],
        ["b", "openai:gpt-4.1", "passed"],
    ]
    assert query(layout, "SELECT count(*) AS n FROM grades_history").n[0] == 4
    # JSON columns are queryable with DuckDB's json functions
    assert (
        query(layout, "SELECT checks->>'$[0].kind' AS kind FROM grades LIMIT 1").kind[0] == "data"
    )
    assert [
        r["name"] for r in read_latest(layout, "grades", model="openai:gpt-4.1", run_date=DAY)
    ] == ["a", "b"]


def test_queries_sharing_one_connection_read_the_store_as_it_is_when_each_runs(tmp_path, layout):
    def status() -> list[str]:
        return query(layout, "SELECT status FROM grades WHERE name = 'a'").status.tolist()

    other = StateFolder(tmp_path / "other" / ".eval")
    ensure_database(other)
    write_rows(other, "grades", [grade("x", "m", "error")], model="m", run_date=DAY)
    with one_connection(layout):
        assert status() == []
        write_rows(layout, "grades", [grade("a", "m", "failed")], model="m", run_date=DAY)
        assert status() == ["failed"]
        # A newer write of the same partition replaces it, as outside the block.
        write_rows(layout, "grades", [grade("a", "m", "passed")], model="m", run_date=DAY)
        with one_connection(layout):  # nested: the same connection
            assert status() == ["passed"]
        # A statement that fails leaves the connection usable by the next one.
        with pytest.raises(duckdb.Error):
            query(layout, "SELECT no_such_column FROM grades")
        assert fetch(layout, "SELECT count(*) FROM grades_history") == (["count_star()"], [(2,)])
        # Another store is read by a connection of its own, never through this one.
        assert query(other, "SELECT name FROM grades").name.tolist() == ["x"]
    assert status() == ["passed"]


def test_views_follow_the_store_when_the_suite_folder_moves(tmp_path, layout):
    write_rows(layout, "grades", [grade("a", "m", "passed")], model="m", run_date=DAY)
    moved = StateFolder(tmp_path / "elsewhere" / ".eval")
    os.renames(layout.root, moved.root)
    assert query(moved, "SELECT count(*) AS n FROM grades").n[0] == 1


def _append_forever(path):
    with Journal(path) as journal:
        i = 0
        while True:
            journal.append({"i": i, "text": "x" * 1000})
            i += 1


@pytest.mark.slow  # subprocesses
def test_journal_survives_kill_9_and_skips_a_torn_line(layout):
    path = layout.journal_path("agent_runs", "m", DAY, "crashed")
    process = multiprocessing.get_context("spawn").Process(target=_append_forever, args=(path,))
    process.start()
    while not path.exists() or path.stat().st_size < 50_000:
        pass
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    with open(path, "a") as handle:
        handle.write('{"i": "torn')
    records = read_journals(journal_files(layout, "agent_runs", "m", DAY))
    assert len(records) >= 40
    assert [r["i"] for r in records] == list(range(len(records)))


def test_a_journal_record_is_readable_at_once_and_on_disk_when_closed(layout, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = layout.journal_path("agent_runs", "m", DAY, "live")
    with Journal(path) as journal:
        for i in range(50):
            journal.append({"i": i})
            # Written and flushed as it comes: a crash of this process now loses nothing.
            assert read_journals([path])[-1] == {"i": i}
    # The fsyncs ran on the journal's thread, at least once after the last record.
    assert 1 <= len(synced) <= 50
    assert [r["i"] for r in read_journals([path])] == list(range(50))


def test_a_journal_whose_fsync_fails_says_so(layout, monkeypatch):
    def broken(_fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    journal = Journal(layout.journal_path("agent_runs", "m", DAY, "broken"))
    journal.append({"i": 0})
    with pytest.raises(OSError, match="Input/output error"):
        journal.close()


def test_a_journaled_partition_removes_journals_only_once_it_wrote(layout):
    def journaled() -> list[int]:
        return sorted(r["i"] for r in read_journals(journal_files(layout, "agent_runs", "m", DAY)))

    with Journal(layout.journal_path("agent_runs", "m", DAY, "crashed")) as crashed:
        crashed.append({"i": 0})
    # An attempt that dies before writing the partition leaves every journal, its own too.
    with pytest.raises(RuntimeError), JournaledPartition(layout, "agent_runs", "m", DAY) as attempt:
        assert [record for _, _, record in attempt.journaled()] == [{"i": 0}]
        with attempt.journal() as journal:
            journal.append({"i": 1})
        raise RuntimeError("killed")
    assert journaled() == [0, 1]

    with Journal(layout.journal_path("agent_runs", "m", DAY, "live")) as live:
        live.append({"i": 2})  # another evaluation of the partition, running now
        with JournaledPartition(layout, "agent_runs", "m", DAY) as attempt:
            assert sorted(record["i"] for _, _, record in attempt.journaled()) == [0, 1, 2]
            with attempt.updating():
                written = attempt.write("tool_calls", [])
        # Written: the journals it read are gone, the one still being written stays.
        assert journaled() == [2]
    assert written.stem.endswith(f"_{attempt.materialization_id}")  # the journal's id


@pytest.mark.slow  # subprocesses
def test_writes_from_parallel_processes_and_a_reader_lose_nothing(layout):
    script = textwrap.dedent(
        f"""
        import sys, datetime
        from pathlib import Path
        from eval_pipeline.store import StateFolder, write_rows
        layout = StateFolder(Path({str(layout.root)!r}))
        model = sys.argv[1]
        for day in range(1, 21):
            d = datetime.date(2026, 6, day)
            rows = [{{"name": f"case{{i}}", "model": model, "run_date": d, "attempt": 0,
                      "status": "passed", "passed": True}} for i in range(50)]
            write_rows(layout, "grades", rows, model=model, run_date=d)
        """
    )
    reader = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from eval_pipeline.store import StateFolder, connect
        layout = StateFolder(Path({str(layout.root)!r}))
        deadline = time.time() + 60
        seen = 0
        while seen < 2000 and time.time() < deadline:
            with connect(layout) as c:
                seen = c.execute("SELECT count(*) FROM grades").fetchone()[0]
        print(seen)
        """
    )
    writers = [subprocess.Popen([sys.executable, "-c", script, f"model-{i}"]) for i in range(2)]
    watcher = subprocess.Popen(
        [sys.executable, "-c", reader], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert all(w.wait(timeout=120) == 0 for w in writers)
    out, err = watcher.communicate(timeout=120)
    assert watcher.returncode == 0, err
    assert int(out) == 2000
    counts = query(
        layout,
        "SELECT model, count(*) AS n, count(DISTINCT run_date) AS days FROM grades GROUP BY model ORDER BY model",
    )
    assert counts.values.tolist() == [["model-0", 1000, 20], ["model-1", 1000, 20]]


def test_a_partition_whose_latest_write_is_empty_shows_no_rows(layout):
    write_rows(
        layout,
        "tool_calls",
        [{"name": "a", "model": "m", "tool": "execute_sql"}],
        model="m",
        run_date=DAY,
    )
    write_rows(
        layout,
        "tool_calls",
        [{"name": "b", "model": "n", "tool": "list_tables"}],
        model="n",
        run_date=DAY,
    )
    write_rows(layout, "tool_calls", [], model="m", run_date=DAY)  # the runs now call no tool
    assert read_latest(layout, "tool_calls", model="m", run_date=DAY) == []
    rows = query(layout, "SELECT model, name FROM tool_calls ORDER BY model")
    assert rows.values.tolist() == [["n", "b"]]
    assert query(layout, "SELECT count(*) AS n FROM tool_calls_history").n[0] == 2

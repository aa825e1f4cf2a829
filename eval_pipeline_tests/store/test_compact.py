"""Compaction: the views show the same rows before and after, later writes supersede the
segments, and readers and writers running meanwhile never fail nor lose a row."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from eval_pipeline.store import (
    TABLES,
    StateFolder,
    compact_store,
    connect,
    current_generation,
    fetch,
    latest_file,
    publish_results,
    query,
    read_latest,
    write_rows,
)
from eval_pipeline.viewer import StoreReader
from eval_pipeline_tests.store.conftest import DAY, grade

PAST = datetime(2026, 6, 1, 12, tzinfo=UTC)


MODELS = ("m1", "provider/m:2")
DAYS = (DAY, DAY + timedelta(days=1))


def populate(layout: StateFolder, start: datetime, *, tag: str = "") -> None:
    """Every table written, with superseded writes and an empty newest write."""
    at = iter(start + timedelta(seconds=i) for i in range(10_000))
    write_rows(layout, "test_cases", [{"name": "a", "kinds": ["data"]}], written_at=next(at))
    write_rows(
        layout,
        "test_cases",
        [{"name": "a", "kinds": ["data"], "tags": ["x"]}, {"name": "b" + tag}],
        written_at=next(at),
    )
    for day in DAYS:
        write_rows(
            layout,
            "reference_results",
            [{"name": "a", "run_date": day}],
            run_date=day,
            written_at=next(at),
        )
        for model in MODELS:
            where = {"model": model, "run_date": day}
            write_rows(layout, "grades", [grade("a", model, "failed", day)], **where,
                       written_at=next(at))  # fmt: skip
            write_rows(
                layout, "grades",
                [grade("a", model, "passed", day), grade("b" + tag, model, "error", day)],
                **where, written_at=next(at),
            )  # fmt: skip
            write_rows(layout, "agent_runs", [{"key": "k", "name": "a", "model": model,
                       "run_date": day, "attempt": 0}], **where, written_at=next(at))  # fmt: skip
            write_rows(layout, "tool_calls", [{"name": "a", "model": model, "run_date": day,
                       "tool": "execute_sql"}], **where, written_at=next(at))  # fmt: skip
            if model == MODELS[0]:  # the runs now call no tool
                write_rows(layout, "tool_calls", [], **where, written_at=next(at))
            write_rows(layout, "model_summaries", [{"model": model, "run_date": day,
                       "pass_rate": 0.5}], **where, written_at=next(at))  # fmt: skip
            write_rows(layout, "labels", [{"label_id": f"l{tag}", "name": "a", "model": model,
                       "run_date": day, "attempt": 0, "passed": True}],
                       written_at=next(at))  # fmt: skip


def snapshot(layout: StateFolder, *, published: bool = False) -> dict[str, list]:
    """Every row of every view (`published`: of results.duckdb's tables), in a stable order."""
    views = [v for name in TABLES for v in (name, f"{name}_history")] + ["labels_latest"]
    result = {}
    opened = duckdb.connect(str(layout.database), read_only=True) if published else connect(layout)
    with opened as connection:
        for view in views:
            cursor = connection.execute(f"SELECT * FROM {view}")
            columns = [c[0] for c in cursor.description]
            rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
            result[view] = sorted((sorted(r.items()) for r in rows), key=repr)
    return result


def partitions_latest(layout: StateFolder) -> dict:
    result = {("test_cases",): read_latest(layout, "test_cases")}
    for day in DAYS:
        result[("reference_results", day)] = read_latest(layout, "reference_results", run_date=day)
        for table in ("grades", "agent_runs", "tool_calls", "model_summaries"):
            for model in MODELS:
                rows = read_latest(layout, table, model=model, run_date=day)
                result[(table, model, day)] = sorted((sorted(r.items()) for r in rows), key=repr)
    return result


def data_files(layout: StateFolder) -> list:
    return sorted(
        p for p in layout.tables_dir.rglob("[0-9]*.parquet") if "_segments" not in p.parts
    )


def segments(layout: StateFolder) -> list:
    return sorted(p.name for p in layout.segments_root.rglob("*.parquet"))


def test_views_and_read_latest_are_unchanged_by_compaction(layout):
    populate(layout, PAST)
    before, latest = snapshot(layout), partitions_latest(layout)
    assert before["tool_calls"] and before["grades_history"]

    report = compact_store(layout)  # default cutoff: ten minutes ago; every file is older
    assert report.status == "compacted", report.message
    assert report.tables["grades"].files == 8 and report.tables["grades"].current_rows == 8
    assert data_files(layout) == []  # folded into the segments, then deleted
    assert snapshot(layout) == before
    assert partitions_latest(layout) == latest
    assert read_latest(layout, "tool_calls", model=MODELS[0], run_date=DAY) == []
    assert latest_file(layout, "grades", model=MODELS[0], run_date=DAY) is None
    assert query(layout, "SELECT count(*) AS n FROM tool_calls").n[0] == 2


def test_writes_after_compaction_supersede_the_segments(layout):
    populate(layout, PAST)
    assert compact_store(layout).status == "compacted"
    write_rows(layout, "grades", [grade("c", MODELS[0], "passed")], model=MODELS[0], run_date=DAY)
    write_rows(layout, "tool_calls", [], model=MODELS[1], run_date=DAY)
    write_rows(layout, "test_cases", [{"name": "z"}])

    _, rows = fetch(layout, "SELECT model, run_date, name FROM grades ORDER BY ALL")
    assert rows == [
        (MODELS[0], DAY, "c"),
        (MODELS[0], DAYS[1], "a"),
        (MODELS[0], DAYS[1], "b"),
        (MODELS[1], DAY, "a"),
        (MODELS[1], DAY, "b"),
        (MODELS[1], DAYS[1], "a"),
        (MODELS[1], DAYS[1], "b"),
    ]
    assert query(layout, "SELECT count(*) AS n FROM grades_history").n[0] == 13
    assert query(layout, "SELECT count(*) AS n FROM tool_calls").n[0] == 1
    assert query(layout, "SELECT name FROM test_cases").name.tolist() == ["z"]
    assert [r["name"] for r in read_latest(layout, "grades", model=MODELS[0], run_date=DAY)] == [
        "c"
    ]
    assert read_latest(layout, "tool_calls", model=MODELS[1], run_date=DAY) == []


def test_compaction_leaves_no_empty_folder_and_a_writer_recreates_its_own(layout, monkeypatch):
    populate(layout, PAST)
    assert compact_store(layout).status == "compacted"
    # Every glob of the views and listing of the store would walk them (a year: 12k).
    folders = [p for p in layout.tables_dir.rglob("*") if p.is_dir()]
    assert [p for p in folders if not any(p.iterdir())] == []
    assert not layout.partition_dir("grades", model=MODELS[0], run_date=DAY).exists()

    # A compaction that removes the folder between the writer's mkdir and its write.
    write_table = pq.write_table

    def compacted_meanwhile(table, where, **options):
        monkeypatch.setattr(pq, "write_table", write_table)
        Path(where).parent.rmdir()
        return write_table(table, where, **options)

    monkeypatch.setattr(pq, "write_table", compacted_meanwhile)
    write_rows(layout, "grades", [grade("c", MODELS[0], "passed")], model=MODELS[0], run_date=DAY)
    assert [r["name"] for r in read_latest(layout, "grades", model=MODELS[0], run_date=DAY)] == [
        "c"
    ]


def test_a_second_compaction_folds_the_first(layout):
    populate(layout, PAST)
    first = compact_store(layout, before=PAST + timedelta(seconds=16))  # day 1 only
    assert first.status == "compacted"
    assert data_files(layout)  # the later files stay
    middle = snapshot(layout)
    populate(layout, PAST + timedelta(hours=1), tag="2")
    expected, latest = snapshot(layout), partitions_latest(layout)
    assert expected != middle

    second = compact_store(layout)
    assert second.status == "compacted" and second.cutoff > first.cutoff
    assert current_generation(layout) == second.cutoff
    assert all(name.startswith(second.cutoff) for name in segments(layout))  # one generation
    assert data_files(layout) == []
    assert snapshot(layout) == expected
    assert partitions_latest(layout) == latest
    assert compact_store(layout).status == "nothing"


@pytest.mark.slow  # subprocesses
def test_a_reader_holding_the_database_never_stops_compaction_nor_sees_it(layout):
    """results.duckdb holds copies of the rows, not paths to the files compaction deletes."""
    populate(layout, PAST)
    publish_results(layout)
    before = snapshot(layout)
    assert snapshot(layout, published=True) == before
    hold = (
        f"import duckdb, sys; c = duckdb.connect({str(layout.database)!r}, read_only=True); "
        "print('open', flush=True); sys.stdin.read(); "
        "print(c.execute('SELECT count(*) FROM grades_history').fetchone()[0])"
    )
    reader = subprocess.Popen(
        [sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout.readline().strip() == "open"
        report = compact_store(layout)
        assert report.status == "compacted" and not report.deletion_deferred, report.message
        assert data_files(layout) == []  # every folded file deleted while the reader reads
        assert publish_results(layout)  # the files changed: a new file, the reader keeps its own
    finally:
        out, _ = reader.communicate("", timeout=30)
    assert out.split() == [str(len(before["grades_history"]))]  # its snapshot, whole
    assert snapshot(layout) == before
    assert snapshot(layout, published=True) == before


def test_the_viewer_reads_compacted_partitions(layout):
    populate(layout, PAST)
    reader = StoreReader(layout)
    keys = [(m, d) for m in MODELS for d in DAYS]

    def rows() -> list:
        with reader.cursor() as con:
            source = reader.partitions("grades", keys)
            found = con.execute(f"SELECT model, run_date, name, status FROM {source} g").fetchall()
            snap = con.execute("SELECT count(*) FROM grades_snapshot").fetchone()[0]
        return sorted(found), snap

    before = rows()
    assert len(before[0]) == 8 and before[1] == 8
    assert compact_store(layout).status == "compacted"
    assert rows() == before
    write_rows(layout, "grades", [grade("c", MODELS[0], "passed")], model=MODELS[0], run_date=DAY)
    after, snap = rows()
    assert len(after) == 7 and snap == 7
    reader.close()


@pytest.mark.slow  # subprocesses
def test_readers_and_writers_during_compactions_never_fail_nor_lose_a_row(layout):
    writer = textwrap.dedent(
        f"""
        import sys, datetime, time
        from pathlib import Path
        from eval_pipeline.store import StateFolder, write_rows
        layout = StateFolder(Path({str(layout.root)!r}))
        model = sys.argv[1]
        for day in range(1, 31):
            d = datetime.date(2026, 6, day)
            for version in range(2):  # every partition written twice: the second counts
                rows = [{{"name": f"case{{i}}", "model": model, "run_date": d, "attempt": 0,
                          "status": "passed", "passed": bool(version)}} for i in range(20)]
                write_rows(layout, "grades", rows, model=model, run_date=d)
                time.sleep(0.05)  # writes spread over seconds, so compactions fall among them
        """
    )
    reader = textwrap.dedent(
        f"""
        import duckdb, datetime, time
        from pathlib import Path
        from eval_pipeline.store import StateFolder, connect, read_latest
        from eval_pipeline.viewer import StoreReader
        layout = StateFolder(Path({str(layout.root)!r}))
        viewer = StoreReader(layout)
        print("ready", flush=True)  # imported: the writers start now
        deadline = time.time() + 90
        seen, during = None, 0
        while seen != (2400, 1200) and time.time() < deadline:
            with connect(layout) as c:
                seen = c.execute(
                    "SELECT (SELECT count(*) FROM grades_history), (SELECT count(*) FROM grades)"
                ).fetchone()
                wrong = c.execute("SELECT count(*) FROM grades WHERE NOT passed").fetchone()[0]
                assert wrong <= 20 * 2, wrong  # at most one partition per writer in between
            for model in ("model-0", "model-1"):
                rows = read_latest(layout, "grades", model=model, run_date=datetime.date(2026, 6, 1))
                assert len(rows) in (0, 20), len(rows)
            with viewer.cursor() as con:
                con.execute("SELECT count(*) FROM grades_snapshot").fetchone()
            during += seen[0] < 2400  # a query made while the writers were still writing
            time.sleep(0.01)
        print(seen, during)
        """
    )
    watcher = subprocess.Popen(
        [sys.executable, "-c", reader], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # On a loaded machine the reader's imports alone can outlast the writes.
    assert watcher.stdout.readline().strip() == "ready", watcher.stderr.read()
    writers = [subprocess.Popen([sys.executable, "-c", writer, f"model-{i}"]) for i in range(2)]
    compactions = []
    while any(w.poll() is None for w in writers) or len(compactions) < 3:
        # A short margin: the writers' files are complete within milliseconds.
        report = compact_store(layout, before=datetime.now(UTC) - timedelta(seconds=0.5))
        compactions.append(report.status)
        time.sleep(0.2)
    assert all(w.wait(timeout=120) == 0 for w in writers)
    out, err = watcher.communicate(timeout=150)
    assert watcher.returncode == 0, err
    assert out.split()[:2] == ["(2400,", "1200)"], out
    # The reader queried while writes and compactions went on (a count, not a rate: a loaded
    # machine makes fewer queries, each of which must still be right).
    assert int(out.split()[2]) >= 2
    assert compactions.count("compacted") >= 2, compactions
    report = compact_store(layout, before=datetime.now(UTC))
    counts = query(
        layout,
        "SELECT model, count(*) AS n, count(DISTINCT run_date) AS days, bool_and(passed) AS ok "
        "FROM grades GROUP BY model ORDER BY model",
    )
    assert counts.values.tolist() == [["model-0", 600, 30, True], ["model-1", 600, 30, True]]
    assert query(layout, "SELECT count(*) AS n FROM grades_history").n[0] == 2400


def test_a_table_compacted_before_its_first_row_reads_as_empty(layout):
    # Only test_cases has rows: the grades segment holds none, and its partitions read as
    # never written (they used to fail on the segment's untyped partition column).
    write_rows(layout, "test_cases", [{"name": "a"}], written_at=PAST)
    assert compact_store(layout).status == "compacted"
    assert read_latest(layout, "grades", model=MODELS[0], run_date=DAY) == []
    write_rows(layout, "grades", [grade("a", MODELS[0], "passed")], model=MODELS[0], run_date=DAY)
    assert [r["status"] for r in read_latest(layout, "grades", model=MODELS[0], run_date=DAY)] == [
        "passed"
    ]

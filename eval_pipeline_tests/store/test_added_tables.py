"""A store written before a table or a column was added (`model_comparisons` and
`model_summaries.ci_low/ci_high`) keeps working, compacted or not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest

from eval_pipeline.store import (
    TABLES,
    StateFolder,
    TableSpec,
    compact_store,
    ensure_database,
    published_current,
    read_latest,
    write_rows,
)
from eval_pipeline_tests.store.conftest import DAY

PAST = datetime(2026, 6, 1, 12, tzinfo=UTC)
NEW = ("ci_low", "ci_high")


def _older_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables as they were before the statistics columns."""
    spec = TABLES["model_summaries"]
    old = pa.schema([f for f in spec.schema if f.name not in NEW])
    monkeypatch.setitem(
        TABLES,
        "model_summaries",
        TableSpec(spec.name, spec.partitioning, old, spec.description),
    )
    monkeypatch.delitem(TABLES, "model_comparisons")


def _rows(layout: StateFolder, sql: str) -> list[tuple]:
    with duckdb.connect(str(layout.database), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def test_a_compacted_older_store_gains_the_new_table_and_columns(tmp_path, monkeypatch):
    layout = StateFolder(tmp_path / ".eval")
    with monkeypatch.context() as older:
        _older_release(older)
        ensure_database(layout)
        write_rows(layout, "model_summaries", [{"model": "m", "run_date": DAY, "pass_rate": 0.5}],
                   model="m", run_date=DAY, written_at=PAST)  # fmt: skip
        assert compact_store(layout, before=PAST + timedelta(hours=1)).status == "compacted"

    # The new release writes both, after the old generation's cutoff.
    later = PAST + timedelta(hours=2)
    write_rows(layout, "model_summaries",
               [{"model": "n", "run_date": DAY, "pass_rate": 0.75, "ci_low": 0.3, "ci_high": 0.95}],
               model="n", run_date=DAY, written_at=later)  # fmt: skip
    write_rows(layout, "model_comparisons",
               [{"run_date": DAY, "model_a": "n", "model_b": "m", "tests": 4, "a_only": 1,
                 "b_only": 0, "p_value": 1.0, "p_adjusted": 1.0, "significant": False}],
               run_date=DAY, written_at=later)  # fmt: skip
    ensure_database(layout)
    assert _rows(layout, "SELECT model_a, model_b, a_only FROM model_comparisons") == [
        ("n", "m", 1)
    ]
    assert _rows(layout, "SELECT model, pass_rate FROM model_summaries ORDER BY model") == [
        ("m", 0.5),
        ("n", 0.75),
    ]

    # The next compaction folds the new column in (NULL for the rows written without it).
    assert compact_store(layout, before=later + timedelta(hours=1)).status == "compacted"
    ensure_database(layout)
    assert _rows(layout, "SELECT model, ci_low, ci_high FROM model_summaries ORDER BY model") == [
        ("m", None, None),
        ("n", 0.3, 0.95),
    ]
    assert _rows(layout, "SELECT count(*) FROM model_comparisons") == [(1,)]


def test_an_uncompacted_older_store_shows_the_new_column_at_once(tmp_path, monkeypatch):
    layout = StateFolder(tmp_path / ".eval")
    with monkeypatch.context() as older:
        _older_release(older)
        ensure_database(layout)
        write_rows(layout, "model_summaries", [{"model": "m", "run_date": DAY, "pass_rate": 0.5}],
                   model="m", run_date=DAY, written_at=PAST)  # fmt: skip
    write_rows(layout, "model_summaries",
               [{"model": "n", "run_date": DAY, "pass_rate": 1.0, "ci_low": 0.5, "ci_high": 1.0}],
               model="n", run_date=DAY)  # fmt: skip
    ensure_database(layout)
    assert _rows(layout, "SELECT model, ci_low FROM model_summaries ORDER BY model") == [
        ("m", None),
        ("n", 0.5),
    ]
    assert _rows(layout, "SELECT count(*) FROM model_comparisons") == [(0,)]


def test_a_store_written_before_runs_and_references_kept_their_database_still_reads(
    tmp_path, monkeypatch
):
    """A later version added `database` to `reference_results` and `agent_runs`: an older
    partition reads with NULL there, beside new rows naming theirs, compacted or not."""
    layout = StateFolder(tmp_path / ".eval")
    with monkeypatch.context() as older:
        for table in ("reference_results", "agent_runs"):
            spec = TABLES[table]
            old = pa.schema([f for f in spec.schema if f.name != "database"])
            older.setitem(
                TABLES, table, TableSpec(spec.name, spec.partitioning, old, spec.description)
            )
        ensure_database(layout)
        write_rows(layout, "reference_results", [{"name": "old", "run_date": DAY, "sql": "SELECT 1"}],
                   run_date=DAY, written_at=PAST)  # fmt: skip
        write_rows(layout, "agent_runs", [{"key": "k1", "name": "old", "model": "m", "run_date": DAY}],
                   model="m", run_date=DAY, written_at=PAST)  # fmt: skip
    assert read_latest(layout, "reference_results", run_date=DAY)[0]["name"] == "old"
    later = PAST + timedelta(hours=2)
    write_rows(layout, "agent_runs",
               [{"key": "k2", "name": "new", "model": "n", "run_date": DAY, "database": "finance"}],
               model="n", run_date=DAY, written_at=later)  # fmt: skip
    ensure_database(layout)
    assert _rows(layout, "SELECT name, database FROM agent_runs ORDER BY name") == [
        ("new", "finance"),
        ("old", None),
    ]
    assert _rows(layout, "SELECT name, database FROM reference_results") == [("old", None)]
    assert compact_store(layout, before=later + timedelta(hours=1)).status == "compacted"
    ensure_database(layout)
    assert _rows(layout, "SELECT name, database FROM agent_runs ORDER BY name") == [
        ("new", "finance"),
        ("old", None),
    ]


def test_a_release_that_adds_a_column_publishes_it_with_no_new_write(tmp_path, monkeypatch):
    layout = StateFolder(tmp_path / ".eval")
    with monkeypatch.context() as older:
        spec = TABLES["model_summaries"]
        columns = pa.schema([f for f in spec.schema if f.name not in NEW])
        older.setitem(TABLES, spec.name, TableSpec(spec.name, spec.partitioning, columns, ""))
        write_rows(layout, "model_summaries", [{"model": "m", "run_date": DAY, "pass_rate": 0.5}],
                   model="m", run_date=DAY, written_at=PAST)  # fmt: skip
        ensure_database(layout)
        assert published_current(layout)
    assert not published_current(layout)  # the file lacks the release's columns
    ensure_database(layout)
    assert _rows(layout, "SELECT model, ci_low FROM model_summaries") == [("m", None)]

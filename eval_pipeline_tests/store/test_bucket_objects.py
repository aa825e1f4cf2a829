"""Writes to a bucket store are whole objects or nothing: a write that fails midway leaves no trace."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipeline.store import StateFolder, read_latest, write_rows
from eval_pipeline_tests.store.buckets import Bucket

DAY = date(2026, 6, 1)
ROW = {"name": "t", "model": "m:x", "run_date": DAY, "attempt": 0, "status": "passed"}


def test_a_write_that_fails_midway_leaves_the_partition_as_it_was(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    layout = StateFolder(
        tmp_path / ".eval", bucket_url=bucket.url, endpoint_url=bucket.endpoint_url
    )
    write_rows(layout, "grades", [ROW], model="m:x", run_date=DAY)
    before = bucket.object_keys()

    real = pq.write_table

    def half_then_crash(table, where, **options):
        real(table.slice(0, 0), where, **options)  # some bytes are out...
        raise OSError("disk gone")  # ...and the writer dies

    with monkeypatch.context() as patch, pytest.raises(OSError, match="disk gone"):
        patch.setattr(pq, "write_table", half_then_crash)
        write_rows(layout, "grades", [{**ROW, "status": "failed"}], model="m:x", run_date=DAY)

    assert bucket.object_keys() == before
    assert [r["status"] for r in read_latest(layout, "grades", model="m:x", run_date=DAY)] == [
        "passed"
    ]
    assert not (tmp_path / ".eval" / "store").exists()

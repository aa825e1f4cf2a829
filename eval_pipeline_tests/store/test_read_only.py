"""`fetch_read_only` under its time limit: a query stopped at any moment ends, and the read with it."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from eval_pipeline.store import QueryTooSlow, ReadLimits, StateFolder, fetch_read_only
from eval_pipeline.store._sandbox import (  # the unit itself: an interrupt before the query starts
    _fetch_interruptibly,
)

ENDLESS = "SELECT * FROM range(1e12::BIGINT) t(x) ORDER BY x DESC LIMIT 1"


def _query_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "eval-pipeline-sql" and t.is_alive()]


class _LateStart:
    """A connection whose query starts 0.3 s after it is asked for, as a worker thread that a
    loaded machine schedules late: DuckDB drops an interrupt that comes before its query."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection

    def execute(self, sql: str):
        time.sleep(0.3)
        return self._connection.execute(sql)

    def interrupt(self) -> None:
        self._connection.interrupt()


def test_a_limit_that_passes_before_the_query_starts_still_stops_it():
    connection = duckdb.connect()
    started = time.monotonic()
    with pytest.raises(QueryTooSlow):
        _fetch_interruptibly(_LateStart(connection), ENDLESS, 0.01, lambda c: (c.fetchall(), 0))
    assert time.monotonic() - started < 5
    assert not _query_threads(), "the query runs on behind the stopped read"
    connection.close()  # waits for a query still running


@pytest.mark.parametrize("timeout_s", [0.001, 0.2])
def test_a_stopped_read_raises_within_moments(tmp_path, timeout_s):
    layout = StateFolder(tmp_path / ".eval")
    started = time.monotonic()
    with pytest.raises(QueryTooSlow):
        fetch_read_only(layout, ENDLESS, ReadLimits(timeout_s=timeout_s))
    assert time.monotonic() - started < 10
    assert not _query_threads()

"""Huge cells and rows from PostgreSQL and MariaDB: cut or refused within the sandbox's byte caps, and not sent in full.

What crosses the wire is counted by a relay between the sandbox and the server: a result of
hundreds of megabytes must cost a few, which is what bounds the memory of the client (a
driver reads a row whole before anything can cut it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading

import pytest

from eval_pipeline.sandbox import ServerSandbox
from eval_pipeline_tests.cli.test_cli_lost_server import Relay
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import Server

pytestmark = pytest.mark.slow

CUT = "[cut: 100,000,000 bytes, over limits.query_cell_max_bytes of 65,536]"
BUDGET = "the result passed 8,000,000 bytes (limits.query_max_bytes)"


class CountingRelay(Relay):
    """A relay that counts the bytes it passes on, both ways."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(target)
        self.passed = 0
        self._count = threading.Lock()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:  # type: ignore[override]
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                with self._count:
                    self.passed += len(data)
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture(params=["postgres", "mariadb"])
def relayed(request: pytest.FixtureRequest):
    """The server behind a counting relay, and the relay."""
    server: Server = request.getfixturevalue(request.param)
    relay = CountingRelay((server.host, server.port))
    relay.start()
    try:
        yield dataclasses.replace(server, port=relay.port), relay
    finally:
        relay.cut()


def _sent_for(relay: CountingRelay, sandbox: ServerSandbox, sql: str):
    before = relay.passed
    result = sandbox.execute(sql)
    return result, relay.passed - before


def test_huge_cells_are_cut_on_the_server_and_marked_cut(postgres):
    relay = CountingRelay((postgres.host, postgres.port))
    relay.start()
    try:
        server = dataclasses.replace(postgres, port=relay.port)
        with ServerSandbox(database_of(server)) as sandbox:
            result, sent = _sent_for(
                relay,
                sandbox,
                "SELECT i, repeat('x', 100000000) AS big, decode(repeat('ff', 50000000), 'hex') "
                "AS raw FROM generate_series(1, 3) AS i ORDER BY i",
            )
    finally:
        relay.cut()
    assert [row[0] for row in result.rows] == [1, 2, 3]
    for _, big, raw in result.rows:
        assert big.startswith("x" * 60_000) and big.endswith(CUT)
        assert len(big.encode()) <= 65_536
        assert raw == "[cut: 50,000,000 bytes, over limits.query_cell_max_bytes of 65,536] (binary)"
    assert result.note == "6 cell(s) over 65,536 bytes were cut (limits.query_cell_max_bytes)"
    assert not result.truncated
    assert sent < 2_000_000, f"{sent:,} bytes crossed the wire for 450 MB of cells"


def test_a_row_past_the_byte_budget_ends_the_result_truncated(relayed):
    server, relay = relayed
    if server.kind == "postgres":
        cells = ", ".join(f"repeat('y', 60000) AS c{i}" for i in range(150))  # 9 MB a row
        sql = f"SELECT i, {cells} FROM generate_series(1, 3) AS i ORDER BY i"
        small = "SELECT i, repeat('y', 30000) AS c FROM generate_series(1, 400) AS i ORDER BY i"
    else:  # a row of 30 MB: within MariaDB's max_allowed_packet per cell, twice past the budget
        cells = "repeat('y', 15000000) AS a, repeat('y', 15000000) AS b"
        sql = f"SELECT seq AS i, {cells} FROM seq_1_to_3 ORDER BY seq"
        small = "SELECT seq AS i, repeat('y', 30000) AS c FROM seq_1_to_400 ORDER BY seq"
    with ServerSandbox(database_of(server)) as sandbox:
        result, sent = _sent_for(relay, sandbox, sql)
        assert (result.rows, result.truncated) == ([], True)
        assert result.note == f"rows after the first 0 were dropped: {BUDGET}"
        assert sent < 20_000_000, f"{sent:,} bytes crossed the wire for a 27+ MB result"
        # Rows within the budget are kept up to it, and the session (or a new one) goes on.
        result = sandbox.execute(small)
        assert result.truncated and 200 <= len(result.rows) < 400
        assert [row[0] for row in result.rows] == list(range(1, len(result.rows) + 1))
        assert sandbox.execute("SELECT count(*) AS n FROM orders").rows == [(5,)]

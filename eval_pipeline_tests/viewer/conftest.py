"""A store with three days of history, and the viewer serving it on a free port of 127.0.0.1."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline.viewer import ViewerServer, make_server
from eval_pipeline_tests.viewer.history import build_store


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str


def fetch(
    server: ViewerServer,
    path: str,
    *,
    method: str = "GET",
    body: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One request, with the path sent exactly as given (no normalisation of `..`)."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        text = response.read().decode("utf-8")
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, text)
    finally:
        connection.close()


def start(layout: StateFolder) -> tuple[ViewerServer, threading.Thread]:
    server = make_server(layout, port=0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> StateFolder:
    return build_store(tmp_path_factory.mktemp("suite") / ".eval")


@pytest.fixture(scope="module")
def server(layout: StateFolder) -> Iterator[ViewerServer]:
    server, thread = start(layout)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)

"""`eval-pipeline ui` starts the Dagster UI on the suite's own instance."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
QUERY = (
    "{ workspaceOrError { ... on Workspace { locationEntries "
    "{ name locationOrLoadError { __typename } } } } }"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_ui_serves_the_code_location_from_the_suite_instance(tmp_path):
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "eval_config.yaml").write_text("test:\n  models: [replay:demo]\n")
    (suite / "cases" / "hello.yml").write_text("prompt: Hello?\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "EVAL_SUITE_DIR")}
    process = subprocess.Popen(
        [str(SCRIPT), "ui", "--suite", str(suite), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        located = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                reply = httpx.post(
                    f"http://127.0.0.1:{port}/graphql", json={"query": QUERY}, timeout=5
                )
                entries = reply.json()["data"]["workspaceOrError"]["locationEntries"]
                loaded = [
                    (e["name"], (e["locationOrLoadError"] or {}).get("__typename")) for e in entries
                ]
                if loaded and all(kind is not None for _, kind in loaded):
                    located = loaded
                    break
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                pass
            time.sleep(1)
        assert located is not None, "the UI did not come up"
        assert located == [("eval_pipeline.definitions", "RepositoryLocation")], located
        assert (suite / ".eval" / "dagster_home" / "dagster.yaml").exists()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)

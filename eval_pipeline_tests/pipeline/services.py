"""Dagster's webserver and daemon started as a deployment runs them, and the GraphQL the UI sends them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from eval_pipeline_tests.cli.console import DEPLOY
from eval_pipeline_tests.warehouses.servers import _stop, free_port

BIN = Path(sys.executable).parent
WORKSPACE = str(DEPLOY / "workspace.yaml")


LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}
"""


LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


def graphql(base: str, query: str, variables: dict | None = None) -> dict:
    """The `data` of a GraphQL answer of the webserver at `base`; fails on any error."""
    reply = httpx.post(f"{base}/graphql", json={"query": query, "variables": variables or {}})
    reply.raise_for_status()
    body = reply.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


@contextlib.contextmanager
def service(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    with open(log, "w") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        _stop(process)


def stop_group(process: subprocess.Popen, *, timeout_s: float = 60) -> None:
    """Stop a service started in a process group of its own (`start_new_session=True`) and
    everything it started: SIGTERM to the group, SIGKILL if it is still there after
    `timeout_s`."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(what: str, ready, *, timeout_s: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if ready():
                return
        time.sleep(1)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs)
    raise AssertionError(f"{what} within {timeout_s} s\n{tails}")


@contextlib.contextmanager
def dagster_webserver(env: dict[str, str], logs: Path, *, timeout_s: float = 300) -> Iterator[int]:
    """`dagster-webserver` on deploy/workspace.yaml with `env`, its output in
    `logs/webserver.log`; yields its port once it answers."""
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "webserver.log"
    command = [str(BIN / "dagster-webserver"), "-w", WORKSPACE, "-h", "127.0.0.1", "-p", str(port)]
    with service(command, env, log):
        wait_for(
            "the webserver did not answer",
            lambda: httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).is_success,
            timeout_s=timeout_s,
            logs=[log],
        )
        yield port


@contextlib.contextmanager
def dagster_daemon(env: dict[str, str], logs: Path) -> Iterator[subprocess.Popen]:
    """`dagster-daemon run` on deploy/workspace.yaml with `env`, its output in
    `logs/daemon.log`, stopped on exit. Its backfill daemon looks for backfills as it starts,
    then every 30 s (a constant of Dagster's, not a setting of the instance): one started after
    the backfill is launched picks it up at once."""
    logs.mkdir(parents=True, exist_ok=True)
    command = [str(BIN / "dagster-daemon"), "run", "-w", WORKSPACE]
    with service(command, env, logs / "daemon.log") as process:
        yield process


@contextlib.contextmanager
def dagster_services(env: dict[str, str], logs: Path) -> Iterator[int]:
    """The webserver and the daemon together, as a deployment runs them; yields the
    webserver's port once it answers."""
    with dagster_webserver(env, logs) as port, dagster_daemon(env, logs):
        yield port

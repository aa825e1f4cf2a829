"""`eval-pipeline ui` starts the Dagster UI on the suite's own instance, with the repository's
code location, and stops with everything it started on SIGTERM."""

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
import yaml

from eval_pipeline.defs.instance import WORKSPACE_YAML
from eval_pipeline_tests.warehouses.servers import free_port

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
REPOSITORY_WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"
QUERY = (
    "{ workspaceOrError { ... on Workspace { locationEntries "
    "{ name locationOrLoadError { __typename } } } } }"
)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_ui_workspace_is_the_repository_workspace():
    """`dagster dev` / `dg dev -w workspace.yaml` in the repository load the location that
    `eval-pipeline ui` loads: one name, so the daemon keeps one schedule state."""
    assert yaml.safe_load(REPOSITORY_WORKSPACE.read_text()) == yaml.safe_load(WORKSPACE_YAML)


@pytest.mark.slow
def test_ui_serves_the_repository_location_without_warnings_and_stops_on_sigterm(tmp_path):
    suite = tmp_path / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "eval_config.yaml").write_text("test:\n  models: [replay:demo]\n")
    (suite / "cases" / "hello.yml").write_text("prompt: Hello?\n")
    (suite / "recordings").mkdir()  # a valid suite: its sensors tick without an error
    (suite / "recordings" / "demo.jsonl").write_text('{"_comment": "nothing recorded"}\n')
    # A dagster.yaml in the folder the user starts from is not the instance's: no warning.
    (suite / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "EVAL_SUITE_DIR")}
    log = (tmp_path / "ui.log").open("w")
    # Its own session, as a shell job: SIGTERM goes to eval-pipeline alone, which must pass
    # it on; the group's id is then the one to check for leftovers.
    process = subprocess.Popen(
        [str(SCRIPT), "ui", "--port", str(port)],
        cwd=suite,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output = lambda: (tmp_path / "ui.log").read_text()  # noqa: E731
    try:
        deadline = time.monotonic() + 300  # a loaded machine starts Dagster slowly
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
        assert located is not None, "the UI did not come up:\n" + output()
        name = yaml.safe_load(REPOSITORY_WORKSPACE.read_text())["load_from"][0]["python_module"]
        assert located == [(name["location_name"], "RepositoryLocation")], located
        assert (suite / ".eval" / "dagster_home" / "dagster.yaml").exists()

        process.send_signal(signal.SIGTERM)  # to eval-pipeline only, as `kill -TERM <pid>`
        assert process.wait(timeout=120) == 128 + signal.SIGTERM, output()
        assert not listening(port), "something still listens on the UI's port"
        deadline = time.monotonic() + 15
        while group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_alive(process.pid), "a process started by `eval-pipeline ui` is left"
        text = output()
        assert "SupersessionWarning" not in text, text
        assert "will not be used to configure Dagster" not in text, text
        assert "Traceback" not in text, text
    finally:
        if group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


CHILD = """
import sys, time
print("started", flush=True)
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("stopped on SIGINT", flush=True)
    sys.exit(0)
"""

PARENT = """
import sys
from pathlib import Path
from eval_pipeline.cli._ui import run_until_signalled  # the unit itself: signals passed to a stand-in child
sys.exit(run_until_signalled([sys.executable, "-c", sys.argv[1]], env={}, cwd=Path.cwd()))
"""


@pytest.mark.slow
def test_the_ui_started_in_the_background_passes_sigterm_on_as_a_sigint_dagster_obeys(tmp_path):
    """`eval-pipeline ui &` in a script: the shell starts it with SIGINT ignored, which a
    child inherits. The dev server it starts must still stop cleanly on the SIGINT it is
    passed, not be killed once the grace period is over."""
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", PARENT, CHILD],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        try:
            deadline = time.monotonic() + 60
            while "started" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert "started" in log.read_text(), log.read_text()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()
        finally:
            if group_alive(process.pid):
                os.killpg(process.pid, signal.SIGKILL)
    assert "stopped on SIGINT" in log.read_text(), log.read_text()

"""`eval-pipeline ui`: `dg dev` on the suite's instance and workspace, stopped with it by a signal."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from eval_pipeline.cli._options import suite_root
from eval_pipeline.pipeline import pending_records
from eval_pipeline.suite import load_config

# `dg dev` shuts its webserver, daemon and code server down on SIGINT, but (Dagster 1.13) its
# webserver and daemon processes linger after their shutdown and `dg dev` waits 60 s for each
# before it kills them (measured: 64 s from `kill -TERM` to exit). Past this grace the rest
# of the group is ended here: SIGTERM, then SIGKILL (`_end_group`). Their state is in the
# instance already; a run in flight is marked interrupted.
GRACE_SECONDS = 10.0


def cmd_ui(args: argparse.Namespace) -> int:
    """Start the Dagster UI on the instance the command line writes to, loading the same
    code location (`workspace.yaml`'s) as `dagster dev` / `dg dev` run from the repository."""
    from eval_pipeline.defs.instance import instance_home, write_workspace

    config = load_config(suite_root(args))
    home = instance_home(config)
    workspace = write_workspace(home)
    if pending := pending_records(home):
        # What the last evaluations did, in the instance before the UI shows it.
        from eval_pipeline.defs.record import record_pending

        print(f"recording {len(pending)} evaluation(s) in the Dagster instance", file=sys.stderr)
        record_pending(home)
    env = dict(os.environ, DAGSTER_HOME=str(home), EVAL_SUITE_DIR=str(config.root))
    if env.get("PYTHONPATH"):  # it runs from the instance folder: keep relative entries valid
        entries = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in entries if p)
    beside = Path(sys.executable).with_name("dg")  # a venv that is not on PATH
    command = [
        str(beside) if beside.exists() else "dg",
        "dev",
        "--workspace",
        str(workspace),
        "--port",
        str(args.port),
        "--host",
        args.host,
    ]
    print(f"Dagster UI on http://{args.host}:{args.port} (instance {home})", file=sys.stderr)
    # From the instance folder: Dagster warns about any dagster.yaml in the current folder
    # that is not the instance's, and the user's folder may well hold one.
    return run_until_signalled(command, env=env, cwd=home)


def run_until_signalled(command: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> int:
    """Run `command` in its own process group, passing SIGINT and SIGTERM on to it alone as
    SIGINT (the signal Dagster's dev server shuts down cleanly on). To it alone: `dg dev` stops
    its daemon before its code server, and a group-wide signal would end the code server under
    a sensor tick still in flight (a traceback in the log). Whatever the group still holds when
    the command ends, or GRACE_SECONDS after a signal, is killed: nothing is left listening.
    Returns the command's exit code, or 128 + the signal's number when one stopped it."""
    received: list[tuple[int, float]] = []
    started: list[subprocess.Popen] = []

    def forward(signum: int, _frame: object) -> None:
        received.append((signum, time.monotonic()))
        if started:
            started[0].send_signal(signal.SIGINT)

    # The handlers come first: a command started in the background of a shell has SIGINT
    # ignored, and a child inherits an ignored signal but not a handler, so `dg dev` would
    # ignore the SIGINT it is sent. A signal that comes while it starts is passed on after.
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(command, env=dict(env), cwd=cwd, start_new_session=True)
    except BaseException:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        raise
    started.append(child)
    if received:
        child.send_signal(signal.SIGINT)
    try:
        while True:
            # A wait is resumed after a handler ran (PEP 475): poll, to notice the grace end.
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if received and time.monotonic() - received[0][1] > GRACE_SECONDS:
                    _signal_group(child.pid, signal.SIGKILL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _end_group(child.pid)
    return 128 + received[0][0] if received else code


def _signal_group(group: int, signum: int) -> bool:
    """Send `signum` to the process group; False when the group is empty."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


def _end_group(group: int) -> None:
    """Stop what the command started and left behind: SIGTERM, then SIGKILL after a while."""
    if not _signal_group(group, signal.SIGTERM):
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _signal_group(group, 0):
            return
        time.sleep(0.2)
    _signal_group(group, signal.SIGKILL)

"""`eval-pipeline sql` is bounded like the agent's sandbox: time, memory and spill, and Ctrl-C is an interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, run_cli
from eval_pipeline_tests.cli.replay_suite import write_suite

pytestmark = pytest.mark.slow

#: A query that would run until killed: a sort of a trillion rows.
ENDLESS = "SELECT * FROM range(1e12::BIGINT) t(x) ORDER BY x DESC LIMIT 1"


def test_a_query_past_its_time_limit_is_stopped_and_said_so(tmp_path):
    root = write_suite(tmp_path / "suite")
    started = time.monotonic()
    result = run_cli("sql", ENDLESS, "--timeout", "2", cwd=root)
    took = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the query was stopped after 2 s (--timeout)" in result.stderr
    assert "could not run" not in result.stderr and "Traceback" not in result.stderr
    assert took < 30, f"took {took:.0f} s"


@pytest.mark.parametrize("timeout", ["nan", "-1", "0", "inf", "1e300"])
def test_a_timeout_that_is_no_wait_is_refused_as_a_usage_error(tmp_path, timeout):
    root = write_suite(tmp_path / "suite")
    result = run_cli("sql", "SELECT 1", "--timeout", timeout, cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "argument --timeout: expected a number of seconds above 0" in result.stderr
    assert "was stopped" not in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_memory_and_spill_are_bounded_and_settable(tmp_path):
    root = write_suite(tmp_path / "suite")
    sql = (
        "SELECT current_setting('memory_limit') AS memory, "
        "current_setting('max_temp_directory_size') AS spill"
    )
    default = run_cli("sql", sql, "--format", "csv", cwd=root)
    assert default.returncode == 0, default.stderr
    assert default.stdout.splitlines()[1] == "1.8 GiB,3.7 GiB"
    chosen = run_cli(
        "sql", sql, "--format", "csv", "--memory-limit", "100MB", "--max-temp-size", "1GB", cwd=root
    )
    assert chosen.stdout.splitlines()[1] == "95.3 MiB,953.6 MiB", chosen.stdout + chosen.stderr
    # The bounds stay: the query cannot lift them.
    lifted = run_cli("sql", "SELECT 1 FROM (SET memory_limit = '50GB')", cwd=root)
    assert lifted.returncode == 2


def test_ctrl_c_stops_a_query_as_an_interrupt(tmp_path):
    root = write_suite(tmp_path / "suite")
    child = subprocess.Popen(
        [str(SCRIPT), "sql", ENDLESS],
        cwd=root,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Ctrl-C once the command reads the store, its query started: after a fixed 4 s it came,
    # on a loaded machine, while the command was still importing (a traceback, exit -2).
    reading = StateFolder(root / ".eval").readers_lock_file
    deadline = time.monotonic() + 120
    while not _has_open(child.pid, reading) and time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()
        time.sleep(0.1)
    assert _has_open(child.pid, reading), "the command never began to read the store"
    time.sleep(0.5)  # into the query, which never ends by itself
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130, stderr
    assert stderr.strip() == "interrupted", stderr


def _has_open(pid: int, path: Path) -> bool:
    """Whether process `pid` has `path` open (Linux's /proc)."""
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:  # closed meanwhile
            continue
    return False

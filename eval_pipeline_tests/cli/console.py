"""`eval-pipeline` as a user runs it, in this process (`run_cli`) or as the real console
script in a subprocess (`run_cli_subprocess`).

result = run_cli("test", "--date", DAY, cwd=suite)
no_traceback(result)
document = json.loads(written_results(result.stderr).read_text())

`run_cli` calls `eval_pipeline.cli.main` as the console script would, in the environment
`cli_env` gives and in `cwd`, with stdout and stderr captured and stdin empty (none of
them a terminal), and returns what `subprocess.run` would: a process pays the import of
Dagster, DuckDB and pandas (seconds on a loaded CI machine) before it does anything, and
most CLI tests are about what the command does, not about the process. Whatever a call
changes in the process (the environment, the working directory, logging handlers, warning
filters, signal handlers, the suites kept loaded, the secrets to redact) is put back after
it, so each call starts as a new process would; a thread it leaves running fails the test.

`run_cli_subprocess` is the real console script: for tests about the process itself
(signals, `ui`, stdin or a terminal, what it imports, the environment read at import,
crashes), and for a few of the main path so the entry point itself stays covered.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:
    from eval_pipeline_tests.warehouses.servers import Server

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def cli_env() -> dict[str, str]:
    """The caller's environment without what would redirect the instance or force colour."""
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def production_env(home: Path, server: Server) -> dict[str, str]:
    """`cli_env` with DAGSTER_HOME at a copy of deploy/dagster.yaml on `server`'s PostgreSQL."""
    return {
        **cli_env(),
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": server.host,
        "DAGSTER_PG_PORT": str(server.port),
        "DAGSTER_PG_USER": server.user,
        "DAGSTER_PG_PASSWORD": server.password,
        "DAGSTER_PG_DB": server.dbname,
    }


def run_cli_subprocess(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """The real console script in a subprocess, in `env` (default `cli_env()`); `options`
    go to `subprocess.run` (`input`, `preexec_fn`)."""
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        env=dict(cli_env() if env is None else env),
        capture_output=True,
        text=True,
        timeout=timeout,
        **options,
    )


def run_cli(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`eval-pipeline *args` in this process, as `run_cli_subprocess` would run it."""
    from eval_pipeline.cli import main

    _import_as_a_process_would()
    stdout, stderr = io.StringIO(), io.StringIO()
    with _as_a_new_process(args, cwd, cli_env() if env is None else env, stdout, stderr):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse, and sys.exit anywhere below main
            code = _exit_status(exit_.code, stderr)
        except BaseException:  # uncaught: the interpreter prints it and exits 1
            traceback.print_exc(file=stderr)
            code = 1
    _wait_for_the_record()
    return subprocess.CompletedProcess(
        ["eval-pipeline", *args], int(code), stdout.getvalue(), stderr.getvalue()
    )


def _wait_for_the_record() -> None:
    """Wait for the processes the command started to record its evaluation in the Dagster
    instance: a test then looks at the instance as a user sees it once they are done."""
    from eval_pipeline.pipeline import RECORDERS

    while RECORDERS:
        RECORDERS.pop().wait(timeout=300)


def _exit_status(code: object, stderr: io.StringIO) -> int:
    """The status `sys.exit(code)` gives a process: a message is printed and exits 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=stderr)
    return 1


def _import_as_a_process_would() -> None:
    """Modules that set process-wide state when imported (warning filters) are imported
    outside a call, so that state outlives the call as it does in a process."""
    import eval_pipeline.defs  # noqa: F401


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)
_LEFT_THREADS_WAIT_S = 10.0


@contextlib.contextmanager
def _as_a_new_process(
    args: tuple[str, ...],
    cwd: Path,
    env: Mapping[str, str],
    stdout: io.StringIO,
    stderr: io.StringIO,
) -> Iterator[None]:
    from eval_pipeline.pipeline import _loaded_suite  # the unit itself: its cache, emptied
    from eval_pipeline.suite import _secrets  # the unit itself: its registry, emptied

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_argv = sys.argv
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    saved_loggers = _logging_state()
    # A new process has no root handler: a warning logged goes to stderr (logging's last
    # resort), where pytest's handlers would take it from the command's output.
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    saved_threads = set(threading.enumerate())
    saved_secrets = _secrets._KNOWN
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    # stdin: nothing to read and no terminal, as for a command in CI.
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(), stdout, stderr
    sys.argv = [str(SCRIPT), *args]
    # A new process has loaded no suite: a call must not be answered with another's.
    _loaded_suite._LOADED.clear()
    # Secrets are redacted process-wide: one call's must not blank the next call's output.
    _secrets.forget_secrets()
    try:
        with warnings.catch_warnings():
            yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for signum, handler in saved_signals.items():
            if handler is not None:
                signal.signal(signum, handler)
        _restore_logging(saved_loggers)
        _loaded_suite._LOADED.clear()
        _secrets._KNOWN = saved_secrets
        _wait_for_threads_started(saved_threads)


_LoggerState = tuple[list[logging.Handler], int, bool, bool]


def _loggers() -> list[logging.Logger]:
    known = logging.Logger.manager.loggerDict.values()
    return [logging.getLogger(), *(x for x in known if isinstance(x, logging.Logger))]


def _logging_state() -> dict[str, _LoggerState]:
    return {
        logger.name: (list(logger.handlers), logger.level, logger.propagate, logger.disabled)
        for logger in _loggers()
    }


def _restore_logging(saved: dict[str, _LoggerState]) -> None:
    """Handlers a call added (Dagster's, writing to the streams of that call) go with it."""
    for logger in _loggers():
        handlers, level, propagate, disabled = saved.get(
            logger.name, ([], logging.NOTSET, True, False)
        )
        for handler in list(logger.handlers):
            if handler not in handlers:
                logger.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled


def _wait_for_threads_started(before: set[threading.Thread]) -> None:
    """A process ends its threads when it exits; here a thread a call left running would
    go on into the next test. Daemon threads are the package's own pools (kept on purpose,
    bounded); any other thread still running after a while fails the call's test."""
    deadline = time.monotonic() + _LEFT_THREADS_WAIT_S
    for thread in set(threading.enumerate()) - before:
        if thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        assert not thread.is_alive(), f"the command left a thread running: {thread.name}"


def written_results(output: str) -> Path:
    """The results file named by the "results written to …" line, whole on one line even
    when the path is longer than the 80 columns a pipe gets (CI logs, copy-paste)."""
    match = re.search(r"^results written to (\S+\.json)$", output, re.MULTILINE)
    assert match, output
    return Path(match.group(1))


def children(pid: int) -> list[int]:
    """The processes `pid` started that are still running (Linux's /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the task or the process ended meanwhile
            continue
    return found


def cmdline(pid: int) -> bytes:
    """The command line of `pid`, its arguments NUL-separated; empty once it has ended."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def sql_rows(root: Path, query: str) -> list[list[str]]:
    """`eval-pipeline sql` in the suite `root`: the rows of its CSV, without the header."""
    result = run_cli("sql", query, "--format", "csv", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))[1:]


#: The assets an evaluation of the command records, and the stage each belongs to.
STAGE_OF_ASSET = {
    "test_cases": "inputs",
    "reference_results": "inputs",
    "agent_runs": "model",
    "grades": "model",
    "model_summaries": "model",
    "report": "report",
}


def stages_of(suite: Path, home: Path | None = None) -> list[tuple[str, str | None]]:
    """The command's stages recorded in the suite's own instance (or the one in `home`),
    oldest first, one per evaluation: the first it materialized ("inputs", "model",
    "report") and, for a model's, its partition. Every one is tagged as the CLI's."""
    from eval_pipeline.defs.record import EVALUATION_TAG

    home = home or suite / ".eval" / "dagster_home"
    if not home.exists():
        return []
    seen: dict[str, tuple[int, str, str | None]] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for asset, kind in STAGE_OF_ASSET.items():
            for record in instance.fetch_materializations(dg.AssetKey(asset), limit=1000).records:
                event = record.asset_materialization
                assert event.tags["eval_pipeline/source"] == "cli", asset
                partition = event.partition if kind == "model" else None
                first = seen.get(event.tags[EVALUATION_TAG], (record.storage_id, kind, partition))
                seen[event.tags[EVALUATION_TAG]] = min(first, (record.storage_id, kind, partition))
    return [(kind, partition) for _, kind, partition in sorted(seen.values())]


def wait_for_record(suite: Path, *, timeout_s: float = 600.0) -> float | None:
    """Wait until the Dagster record the last command left for the suite's own instance is
    in it (a process of its own writes it after the command ends); the seconds waited, None
    when the command left none. For benchmarks, so that a measurement never overlaps the
    record of the one before."""
    from eval_pipeline.pipeline import pending_records

    home = suite / ".eval" / "dagster_home"
    started = time.monotonic()
    if not pending_records(home):
        return None
    while pending_records(home):
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the Dagster record of {suite} was not written in {timeout_s} s")
        time.sleep(0.05)
    return time.monotonic() - started

"""The process that records an evaluation in its Dagster instance once the command's stages are done: forked ahead, it gets ready while they run, so the command never waits for it.

Recording costs mostly imports: on the sample suite about 1.4 s of CPU in all, of which
importing Dagster and its SQLite storage (SQLAlchemy, Alembic) takes 0.9 s, loading the
suite's asset graph 0.15 s and writing the events 0.25 s (`benchmarks/cli_overhead.py`
prints the figure). A command forks the recorder
as the evaluation begins (`Recorder.fork`, while its only thread is the main one: a fork
copies no other thread's locks), before it knows whether a stage will run; the recorder
waits, costing nothing. Once the stages start the command tells it to get ready
(`Recorder.prepare`: it imports and loads in its own process, on another core), and once
they are done and their record is among the pending ones it tells it to record
(`Recorder.record`): the recorder writes the events and ends, within a moment of the
command. A command that ran no stage dismisses it (`Recorder.dismiss`); a command that
dies, closing the pipe, has it record whatever is pending.

Where the command cannot fork (another thread runs, as in a test runner; not Linux), the
recorder is started as a process of its own (`python -m eval_pipeline.defs.record HOME
--when-told`), which imports everything itself, as the stages start.

What to import and how to record is the Dagster layer's (`defs/record.py`): the command
hands in `prepare`, called in the recorder when it is told to get ready, which returns the
function that records.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from eval_pipeline.pipeline._direct import pending_records

__all__ = ["RECORDERS", "Recorder"]

_READY = b"r"

logger = logging.getLogger(__name__)


class Recorder:
    """One command's recorder process (see the module's docstring). Each started is kept in
    `RECORDERS`, so that none is reaped unwaited."""

    def __init__(
        self,
        home: Path,
        log: Path,
        prepare: Callable[[], Callable[[], int]],
        *,
        pid: int | None = None,
        pipe: int | None = None,
    ) -> None:
        self.home, self.log, self._prepare = home, log, prepare
        self._pid, self._pipe = pid, pipe
        self._process: subprocess.Popen | None = None

    @classmethod
    def fork(cls, home: Path, log: Path, prepare: Callable[[], Callable[[], int]]) -> Recorder:
        """The recorder, forked now if this process may fork (else started by `prepare`)."""
        if not _may_fork_here():
            recorder = cls(home, log, prepare)
        else:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the recorder
                os.close(write)
                _serve(read, home, log, prepare)  # never returns
            os.close(read)
            recorder = cls(home, log, prepare, pid=pid, pipe=write)
        RECORDERS.append(recorder)
        return recorder

    def prepare(self) -> None:
        """The stages start: get ready to record (import, load the asset graph)."""
        if self._pid is not None and self._pipe is not None:
            with contextlib.suppress(OSError):  # it ended: the next command records
                os.write(self._pipe, _READY)
        elif self._pid is None and self._process is None:
            self._process = _start(self.home, self.log)

    def record(self) -> None:
        """The stages are done and their record pending: record it, and end."""
        self._close()

    def dismiss(self) -> None:
        """No stage ran: end without recording (a pending record left by an earlier
        command is recorded all the same)."""
        self._close()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the recorder to end; whether it recorded without an error."""
        if self._process is not None:
            return self._process.wait(timeout) == 0
        if self._pid is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self._pid, os.WNOHANG if deadline else 0)
            if pid:
                self._pid = None
                return os.waitstatus_to_exitcode(status) == 0
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the recorder {self._pid} did not end in {timeout} s")
            time.sleep(0.02)

    def _close(self) -> None:
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()


#: The recorders this process started (a command starts one; a process running several
#: commands, as the tests do, may wait for them).
RECORDERS: list[Recorder] = []


def _may_fork_here() -> bool:
    return (
        sys.platform.startswith("linux")
        and threading.active_count() == 1
        and threading.current_thread() is threading.main_thread()
    )


def _serve(pipe: int, home: Path, log: Path, prepare: Callable[[], Callable[[], int]]) -> None:
    """The forked recorder: wait to be told, get ready, record; then end this process."""
    code = 1
    try:
        # Its own session: a Ctrl-C in the terminal stops the command, not the record.
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # The terminal is the command's: what the recorder has to say goes to its log, and
        # a log it cannot write (a full disk) is not the command's error either.
        _detach_from_terminal()
        # What else the command had open (its model workers' pipes, its store's files) is
        # not the recorder's: holding them would keep a worker waiting for its last job.
        os.closerange(3, pipe)
        os.closerange(pipe + 1, os.sysconf("SC_OPEN_MAX"))
        # Nothing it makes lives long: the collector would only spend time on imports.
        gc.disable()
        told = os.read(pipe, 1)
        if told != _READY and not pending_records(home):
            # Told nothing (no stage ran, or the command died) and nothing pending: it
            # leaves no trace, not even a log (a command refused before any work).
            os._exit(0)
        _log_to(log)
        record = prepare()
        while os.read(pipe, 4096):  # until the command closes it: its stages are done
            pass
        if record is not None:
            _logged(record)
        code = 0
    except BaseException:
        logger.exception("the Dagster record could not be written")
    finally:
        logging.shutdown()
        os._exit(code)  # the command's exit handlers belong to the command


def _detach_from_terminal() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    logging.raiseExceptions = False
    logging.captureWarnings(True)


def _logged(record: Callable[[], int]) -> None:
    started = time.monotonic()
    count = record()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    logger.info(
        f"{count} stage run(s) recorded in {time.monotonic() - started:.2f} s after the "
        f"command's stages; the recorder used {usage.ru_utime + usage.ru_stime:.2f} s of CPU"
    )


def _log_to(log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logger.setLevel(logging.INFO)


def _start(home: Path, log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "eval_pipeline.defs.record", str(home), "--when-told"],
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )

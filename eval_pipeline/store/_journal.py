"""The run journal: each finished record kept the moment it comes, by a thread of the journal's own."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eval_pipeline.store import _objects
from eval_pipeline.store._disk import writing_below
from eval_pipeline.store._locks import journal_lock
from eval_pipeline.suite import IDENTITY_FIELDS, redact_value


class Journal:
    """An append-only JSON-lines file of finished records, each written out as it comes.

    A run is journaled the moment it finishes, so a crash (even kill -9) loses at most the
    runs in flight; the next materialization of the partition reads the journal and reuses
    them. A torn last line from a crash mid-write is skipped when reading. Each record is in
    the operating system's hands when `append` returns (what a crashed process cannot undo);
    the fsync that puts it on the disk runs on a thread of the journal's own, one fsync for
    every record written before it, so the runs' event loop never waits for the disk, and
    `close` returns once the last record is on it.

    In a bucket (no append, no lock there) the journal is a folder of objects, each written
    by one PUT with the records that came since the previous one: a record is there whole or
    not at all. The PUTs run on the journal's thread too, so a bucket that stops answering
    holds that thread, never the runs (nor the model calls they wait on); `append` raises
    once a PUT has failed, which stops the batch.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = None
        self._held = contextlib.ExitStack()
        self._unsent: list[str] = []  # a bucket's records not yet PUT
        self._unsent_lock = threading.Lock()
        if _objects.is_remote(path):
            self._writer: _Writer | None = _Writer(self._put, name="journal-put")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Records are made storable first; should a lone surrogate slip through, it becomes
        # "?" rather than failing the write (and with it every later run of the batch).
        self._handle = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        # Held while the journal is written: `abandoned_journals` tells a live journal (another
        # evaluation of the partition, running now) from one a crash left behind.
        self._held.enter_context(journal_lock(path))
        descriptor = self._handle.fileno()
        self._writer = _Writer(lambda: os.fsync(descriptor), name="journal-fsync")

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(redact_value(record, IDENTITY_FIELDS), default=str, ensure_ascii=False)
        assert self._writer is not None, "the journal is closed"
        if self._handle is None:
            with self._unsent_lock:
                self._unsent.append(line + "\n")
        else:
            with writing_below(self.path.parent):
                self._handle.write(line + "\n")
                self._handle.flush()
        self._writer.request()

    def _put(self) -> None:
        with self._unsent_lock:
            lines, self._unsent = self._unsent, []
        if lines:
            _objects.append_record(self.path, "".join(lines))

    def close(self) -> None:
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                writer.close()
        finally:
            if self._handle is not None:
                self._handle.close()
            self._held.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
            return
        # Already failing (perhaps for the writer's own error): what was written is kept,
        # and the error that stopped the batch is the one reported.
        with contextlib.suppress(Exception):
            self.close()


class _Writer:
    """Runs `work` on a thread of its own whenever asked since it last ran: the requests made
    while it runs share the next run, so a burst of records costs a few fsyncs or PUTs. The
    first error stops it, and is raised to every request after it and by `close`."""

    def __init__(self, work: Callable[[], None], *, name: str) -> None:
        self._work = work
        self._wake = threading.Condition()
        self._pending = self._closing = False
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Have `work` run soon; raises an earlier run's error, so a journal that stopped
        reaching the disk or the bucket stops the batch."""
        with self._wake:
            if self._error is not None:
                raise self._error
            self._pending = True
            self._wake.notify()

    def close(self) -> None:
        """Return once `work` has run after the last request (or raise why it could not)."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closing:
                    self._wake.wait()
                if not self._pending:
                    return
                self._pending = False
            try:
                self._work()
            except Exception as error:
                with self._wake:
                    self._error = error
                return

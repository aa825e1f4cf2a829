"""Every lock the store and the pipeline take: a few shapes of one advisory file lock, in one place.

The store coordinates writers with locks, never by making anyone wait on results.duckdb:

* the partition lock (`updating_partition`) serializes two evaluations of one (model, day)
  from reading its current rows to writing its next ones;
* the publishing lock (`publishing_lock`) lets one process of a machine publish
  results.duckdb (a new file renamed over it: readers of the old one never wait), and
  `next_publication` lets one more wait for it (the others leave the work to that one);
* the readers lock: held shared by readers of the data files (`reading_files`: the views in
  memory, the viewer, a publication), exclusively by compaction before it deletes files
  (`deleting_files`);
* the compaction lock (`compaction_lock`): one compaction at a time, the others skip;
* the journal lock (`journal_lock`, `journal_in_use`): a live journal is told from one a
  crash left behind;
* `file_lock` / `try_file_lock` for any other file (the Dagster instance, a dbt parse).

These are POSIX `flock` locks on lock files (the store's are named by `StateFolder`, below
the state folder): they hold between processes of one machine and vanish with their holder,
so a crash never leaves a stale lock. This module is the seam an object-storage store replaces: a replacement keeps
these names and their contracts (a blocking shape that returns once held; a non-blocking
shape that yields False instead of waiting past `wait_s`; shared readers against one
exclusive deleter; released on exit and when the holder dies, e.g. leases with an expiry),
or makes a lock unnecessary (immutable objects under unique names need none to be written).

A bucket store (`StateFolder.remote`) takes none of the store's cross-process locks, since
its writers may be on other machines: objects are immutable under unique names; two
evaluations of one (model, day) are kept apart by Dagster (one run per partition at a time,
docs/results-in-sql.md "Object storage"); compaction deletes files one generation late instead
of waiting for readers (`store._compact`). The publishing lock and the compaction lock stay:
results.duckdb is per machine, and compaction runs from one schedule.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from eval_pipeline.store._state_folder import StateFolder

_POLL_S = 0.05


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold a lock on `path` (created, with its folder, when missing), waiting until it is
    free; `shared` locks coexist with each other, never with an exclusive one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def try_file_lock(path: Path, *, shared: bool = False, wait_s: float = 0.0) -> Iterator[bool]:
    """Hold a lock on `path` if it comes free within `wait_s` seconds (0: only if free now).

    Yields True while held, or False (holding nothing) when others kept it: the body runs
    either way and decides what to do without the lock (skip, try later).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        deadline = time.monotonic() + wait_s
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(handle, mode)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(_POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def updating_partition(layout: StateFolder, model: str, run_date: date) -> Iterator[None]:
    """The partition lock (exclusive, blocking): hold while reading a (model, day)
    partition's current rows and writing its next ones.

    Two evaluations of one partition (say two selections of the day, started together) then
    write one after the other, the second on top of the first's rows instead of over them:
    a partition's latest state is the union of what both wrote. Readers never wait: they see
    the state before or after a write, never a half one (files are replaced atomically).
    """
    if layout.remote:
        yield
        return
    with file_lock(layout.partition_lock_file(model, run_date)):
        yield


def publishing_lock(layout: StateFolder) -> contextlib.AbstractContextManager[None]:
    """Exclusive, blocking: one process of this machine publishes results.duckdb."""
    return file_lock(layout.publishing_lock_file)


def next_publication(layout: StateFolder) -> contextlib.AbstractContextManager[bool]:
    """Exclusive, non-blocking: True for the one process waiting to publish after the one
    publishing now; False when another already waits (its publication will read the store
    after this caller's writes, so this caller need not publish)."""
    return try_file_lock(layout.publishing_lock_file.with_name(".results-next.lock"))


def reading_files(layout: StateFolder) -> contextlib.AbstractContextManager[None]:
    """The readers lock, shared and blocking: hold while resolving and reading data files
    (the views in memory, the viewer, the pipeline's reuse), so compaction does not delete
    them meanwhile."""
    if layout.remote:
        return contextlib.nullcontext()
    return file_lock(layout.readers_lock_file, shared=True)


def deleting_files(
    layout: StateFolder, *, wait_s: float
) -> contextlib.AbstractContextManager[bool]:
    """The readers lock, exclusive, waiting at most `wait_s`: True once no reader holds
    it (files may be deleted), False when readers kept it that long. (A bucket store's
    compaction deletes only what no view of the last two generations reads: always True.)"""
    if layout.remote:
        return contextlib.nullcontext(True)
    return try_file_lock(layout.readers_lock_file, wait_s=wait_s)


def compaction_lock(layout: StateFolder) -> contextlib.AbstractContextManager[bool]:
    """Exclusive, non-blocking: True for the one compaction that runs, False for the others."""
    return try_file_lock(layout.compaction_lock_file)


def journal_lock(path: Path) -> contextlib.AbstractContextManager[None]:
    """Exclusive, blocking, on a journal file itself: held while that journal is written."""
    return file_lock(path)


def journal_in_use(path: Path) -> bool:
    """Whether a live writer holds the journal at `path` (`journal_lock`)."""
    with try_file_lock(path) as free:
        return not free

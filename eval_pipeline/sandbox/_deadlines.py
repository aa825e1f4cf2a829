"""One watchdog thread that calls each query's interrupt when its time limit passes, unless cancelled first."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable

__all__ = ["Deadline", "call_after"]


class Deadline:
    """A call scheduled by `call_after`; `cancel` before it is due and it never happens."""

    __slots__ = ("_call", "due")

    def __init__(self, due: float, call: Callable[[], None]) -> None:
        self.due = due
        self._call: Callable[[], None] | None = call

    def cancel(self) -> None:
        self._call = None

    def _fire(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call()


class _Watchdog:
    """Runs due calls on its own daemon thread, in order of their deadlines.

    A `threading.Timer` per query started a thread per query, and starting one waits for the
    new thread to run: on a busy machine milliseconds per query, the interpreter lock being
    held by the other runs. One thread sleeping until the nearest deadline costs nothing.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_after(self, seconds: float, call: Callable[[], None]) -> Deadline:
        deadline = Deadline(time.monotonic() + seconds, call)
        with self._wake:
            # Cancelled deadlines are dropped as they come due; these go first when many pile up.
            if len(self._due) > 1024:
                self._due = [d for d in self._due if d[2]._call is not None]
                heapq.heapify(self._due)
            nearest = self._due[0][0] if self._due else None
            heapq.heappush(self._due, (deadline.due, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sql-deadlines", daemon=True)
                self._thread.start()
            elif nearest is None or deadline.due < nearest:
                self._wake.notify()
        return deadline

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    now = time.monotonic()
                    if self._due and self._due[0][0] <= now:
                        deadline = heapq.heappop(self._due)[2]
                        break
                    self._wake.wait(self._due[0][0] - now if self._due else None)
            # One failed interrupt must not stop the others.
            with contextlib.suppress(Exception):
                deadline._fire()


_WATCHDOG = _Watchdog()


def _forget_watchdog() -> None:
    # A forked child has none of the parent's threads: its watchdog would seem to be running.
    global _WATCHDOG
    _WATCHDOG = _Watchdog()


os.register_at_fork(after_in_child=_forget_watchdog)


def call_after(seconds: float, call: Callable[[], None]) -> Deadline:
    """Call `call()` on the watchdog thread once `seconds` have passed, unless cancelled."""
    return _WATCHDOG.call_after(seconds, call)

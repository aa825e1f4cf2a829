"""Blocking work awaited from the event loop on a daemon thread, so a run that is stopped never waits for it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_daemon_thread"]

_T = TypeVar("_T")

#: Idle workers kept for the next calls; more than this many idle at once end.
MAX_IDLE_WORKERS = 64


class _DaemonWorkers:
    """Daemon threads that run one call at a time and wait for the next.

    Starting a thread blocks its caller until the new thread runs, which on a busy machine
    (the interpreter lock held by the other runs) costs the event loop milliseconds per SQL
    query; a worker already waiting takes the call at once. A call that never returns keeps
    its worker, as it kept its own thread before: a new worker is started whenever none is idle.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, call: Callable[[], None], name: str) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that worker is taken: it gets this call or an earlier one
        self._calls.put(call)
        if start:
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            self._calls.get()()
            with self._lock:
                if self._idle >= MAX_IDLE_WORKERS:
                    return
                self._idle += 1


_WORKERS = _DaemonWorkers()


def _forget_workers() -> None:
    # A forked child has none of the parent's threads: its workers would be counted, not there.
    global _WORKERS
    _WORKERS = _DaemonWorkers()


os.register_at_fork(after_in_child=_forget_workers)


async def in_daemon_thread(function: Callable[..., _T], *args: object) -> _T:
    """`function(*args)` on a daemon thread, awaited.

    Unlike `asyncio.to_thread`, whose pool threads `asyncio.run` joins before it returns, a
    call cancelled here (the run's time limit) leaves its thread behind: a query stuck on a
    server that stopped answering then costs that run, not the end of the command. The
    function must bound itself (the SQL sandboxes do) or be harmless to leave running.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def work() -> None:
        try:
            value = context.run(function, *args)
        except BaseException as error:  # handed to the awaiting task
            failure = error
            outcome = lambda: future.set_exception(failure)  # noqa: E731
        else:
            outcome = lambda: future.set_result(value)  # noqa: E731
        # A closed loop (RuntimeError): nobody waits for this any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome)

    _WORKERS.submit(work, getattr(function, "__name__", "work"))
    return await future

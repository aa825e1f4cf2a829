"""Blocking work awaited from the event loop on a daemon thread, so a run that is stopped never waits for it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_daemon_thread"]

_T = TypeVar("_T")


async def in_daemon_thread(function: Callable[..., _T], *args: object) -> _T:
    """`function(*args)` on a thread of its own, awaited.

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

    threading.Thread(target=work, name=getattr(function, "__name__", "work"), daemon=True).start()
    return await future

"""Blocking calls awaited on daemon workers: reused when idle, never waited for when stuck."""

from __future__ import annotations

import asyncio
import threading

from eval_pipeline.agents._threads import (  # the unit itself: the daemon worker pool
    in_daemon_thread,
)


def test_idle_workers_take_the_next_calls_and_a_stuck_one_is_left_behind() -> None:
    release = threading.Event()

    async def main() -> tuple[list[threading.Thread], threading.Thread]:
        # Thread objects, kept alive: an ident may be reused once a thread ends.
        sequential = [await in_daemon_thread(threading.current_thread) for _ in range(20)]
        stuck = asyncio.ensure_future(in_daemon_thread(release.wait))
        await asyncio.sleep(0.05)
        after = await asyncio.wait_for(in_daemon_thread(threading.current_thread), 5)
        stuck.cancel()
        return sequential, after

    sequential, after = asyncio.run(main())
    release.set()
    assert len({id(t) for t in sequential}) < 20  # not a thread started per call
    assert after is not threading.current_thread()


def test_an_error_reaches_the_awaiting_task() -> None:
    def fail() -> None:
        raise ValueError("boom")

    async def main() -> None:
        await in_daemon_thread(fail)

    try:
        asyncio.run(main())
    except ValueError as error:
        assert str(error) == "boom"
    else:
        raise AssertionError("no error")

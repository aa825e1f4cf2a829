"""The watchdog that keeps the SQL sandbox's time limits: due calls in order, cancelled ones never."""

from __future__ import annotations

import threading
import time

from eval_pipeline.sandbox._deadlines import call_after  # the unit itself: the watchdog


def test_due_calls_run_in_deadline_order_and_cancelled_ones_never() -> None:
    calls: list[str] = []
    both = threading.Semaphore(0)
    late = call_after(0.3, lambda: (calls.append("late"), both.release()))
    early = call_after(0.05, lambda: (calls.append("early"), both.release()))
    call_after(0.1, lambda: calls.append("cancelled")).cancel()
    call_after(0.15, lambda: 1 / 0)  # a failing call does not stop the ones after it
    assert both.acquire(timeout=5) and both.acquire(timeout=5)
    # In the order of their deadlines as taken: "late" first only if this thread was held up
    # for 0.25 s between the two calls (a loaded machine), which made it due first.
    assert calls == [name for _, name in sorted([(early.due, "early"), (late.due, "late")])]


def test_a_call_is_not_early() -> None:
    started = time.monotonic()
    fired = threading.Event()
    call_after(0.2, fired.set)
    assert fired.wait(5)
    assert time.monotonic() - started >= 0.2

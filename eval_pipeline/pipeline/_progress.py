"""Progress of runs in this process, for whoever displays it (the command line's live view)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from eval_pipeline.agents._types import AgentRun

Listener = Callable[[AgentRun], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def subscribe(listener: Listener) -> Callable[[], None]:
    """Be told of every run that finishes in this process; returns the unsubscribe function."""
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def publish(run: AgentRun) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(run)

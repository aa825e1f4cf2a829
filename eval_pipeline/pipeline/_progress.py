"""Progress of an evaluation in this process, for whoever displays it (the command line's live view)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# Listeners are told of each AgentRun as it finishes and of each Grade as it is decided.
Listener = Callable[[Any], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def subscribe(listener: Listener) -> Callable[[], None]:
    """Be told of every run and grade produced in this process; returns the unsubscribe."""
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def publish(item: Any) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(item)

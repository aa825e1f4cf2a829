"""A completion cache on disk: judge and extraction answers kept by their exact inputs."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any

from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.suite import redact_value


class FileCompletionCache:
    """Every process appends to a file of its own and reads everyone's, so concurrent
    materializations share answers without ever writing to the same file."""

    def __init__(self, layout: StateFolder) -> None:
        self.folder = layout.cache_dir / "completions"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._items: dict[str, dict[str, Any]] = {}
        written: dict[str, float] = {}
        for path in sorted(self.folder.glob("*.jsonl")):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # torn by a crash mid-write
                    # the latest answer for a key wins (a `--rejudge` replaces older ones)
                    at = entry.get("at", 0.0)
                    if at >= written.get(entry["key"], -1.0):
                        written[entry["key"]] = at
                        self._items[entry["key"]] = entry["value"]
        self._path = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        return self._items.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        # A judge may quote a piece of a key: redacted before it is kept.
        entry = redact_value({"key": key, "value": value, "at": time.time()})
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            self._items[key] = value
            with open(self._path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    def __len__(self) -> int:
        return len(self._items)

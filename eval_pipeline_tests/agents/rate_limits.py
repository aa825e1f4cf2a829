"""A provider's rate limit, as real providers enforce and announce it, for the test servers.

`RateLimit` is a token bucket of requests as OpenAI and Anthropic describe theirs (it holds
at most `per_minute` requests and refills continuously at that rate; `start` says how full it
is at first, so a short test meets the limit), wrapped around any script: a request the bucket covers gets the
script's answer, any other a 429 with `retry-after`; every answer carries the provider's
rate-limit headers (OpenAI's `x-ratelimit-*-requests`, or Anthropic's
`anthropic-ratelimit-requests-*` with an RFC 3339 reset), or none (`headers=False`).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Literal

from eval_pipeline_tests.agents.servers import RecordedRequest, Script, Step
from eval_pipeline_tests.agents.steps import error


class RateLimit:
    """A script answering within a requests-per-minute limit (see the module's docstring)."""

    def __init__(
        self,
        script: Script,
        *,
        per_minute: float,
        start: float,
        protocol: Literal["openai", "anthropic"] = "openai",
        headers: bool = True,
    ) -> None:
        self.script = script
        self.per_second = per_minute / 60
        self.per_minute = per_minute
        self.protocol = protocol
        self.headers = headers
        self.answered = 0  # requests the bucket covered
        self.refused = 0  # requests answered 429
        #: How often each request (by its body) was answered 429.
        self.refusals: Counter[bytes] = Counter()
        self._level = float(start)
        self._at = time.monotonic()
        self._served = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest, _index: int) -> Step:
        with self._lock:
            now = time.monotonic()
            self._level = min(self.per_minute, self._level + (now - self._at) * self.per_second)
            self._at = now
            covered = self._level >= 1
            if covered:
                self._level -= 1
                self.answered += 1
                index = self._served
                self._served += 1
            else:
                self.refused += 1
                self.refusals[request.body] += 1
            level = self._level
        step = self._answer(request, index) if covered else self._refusal(level)
        return dataclasses.replace(step, headers=step.headers + self._headers(level))

    def _answer(self, request: RecordedRequest, index: int) -> Step:
        if callable(self.script):
            return self.script(request, index)
        return self.script[index % len(self.script)]

    def _refusal(self, level: float) -> Step:
        wait = (1 - level) / self.per_second
        refusal = error(429, "Rate limit reached for requests")
        # Whole seconds, as most providers send it, and never 0 while the bucket is empty.
        return dataclasses.replace(refusal, headers=(("retry-after", str(math.ceil(wait))),))

    def _headers(self, level: float) -> tuple[tuple[str, str], ...]:
        if not self.headers:
            return ()
        remaining = int(level)
        until_full = (self.per_minute - level) / self.per_second
        if self.protocol == "openai":
            return (
                ("x-ratelimit-limit-requests", str(int(self.per_minute))),
                ("x-ratelimit-remaining-requests", str(remaining)),
                ("x-ratelimit-reset-requests", f"{until_full:.3f}s"),
            )
        reset = datetime.now(UTC) + timedelta(seconds=until_full)
        return (
            ("anthropic-ratelimit-requests-limit", str(int(self.per_minute))),
            ("anthropic-ratelimit-requests-remaining", str(remaining)),
            ("anthropic-ratelimit-requests-reset", reset.isoformat().replace("+00:00", "Z")),
        )

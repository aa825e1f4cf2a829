"""How fast one endpoint is asked: the pace its rate-limit headers and its 429s allow.

A provider's rate limit is a pace, not a failure. Every request to an endpoint takes a turn
from its `Pace`, which waits until the endpoint's budget (what its last answer said remains,
refilled at the rate its limits give) covers the request, and until fewer requests are in
flight than the endpoint has shown it accepts. A 429 pauses every request to that endpoint
for as long as it asks (`Retry-After`) and halves the requests in flight; each success lets
one more in, up to the caller's own concurrency (additive increase, multiplicative decrease,
as TCP does), so the pace settles just under the limit instead of bouncing off it.

The headers read, per provider:

* OpenAI (and the servers copying it): `x-ratelimit-limit-requests`,
  `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` (a duration: `1s`, `6m0s`,
  `250ms`), and the same three for `tokens`;
* Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}`, the reset an RFC 3339 time.

Both providers refill their budget continuously: the reset says when the budget is full
again, so the refill rate is what is missing divided by the time to the reset (or the limit
per minute, before anything is missing).
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Pace", "Turn", "estimated_tokens"]

#: Both OpenAI and Anthropic state their limits per minute.
_WINDOW_S = 60.0
#: A duration as OpenAI writes it: `1s`, `6m0s`, `1h2m3.5s`, `250ms`.
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
#: The share of the refill rate the headers imply that is counted on: their counts are whole
#: numbers and their resets rounded, so the rate read from them can be a little high.
_RATE_MARGIN = 0.97
#: Waits shorter than this are not the limit setting the pace (scheduling noise).
_NOTICEABLE_WAIT_S = 0.1


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset duration (`6m0s` → 360.0); None when it is not one."""
    text = text.strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _reset_seconds(text: str, now: datetime) -> float | None:
    """Seconds until a reset, written as a duration (OpenAI) or an RFC 3339 time (Anthropic)."""
    seconds = parse_duration(text)
    if seconds is not None:
        return seconds
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def estimated_tokens(body: object, size: int) -> int:
    """What a request may count against a tokens-per-minute limit: its text (about four bytes
    a token) and the completion it allows (`max_tokens`), as OpenAI reserves it."""
    allowed = 0
    if isinstance(body, Mapping):
        for key in ("max_tokens", "max_completion_tokens"):
            value = body.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                allowed = value
    return size // 4 + allowed


@dataclass
class _Budget:
    """One of an endpoint's limits (requests or tokens) as an answer stated it.

    The count an answer carries is the endpoint's as it took that answer's request: the
    requests taken after it (`taken_before`, the running total of reservations up to and
    with that request) are in no count yet, whatever order the answers arrive in.
    """

    limit: float
    remaining: float
    rate: float  # refill, per second, as the answer's headers imply it
    #: When the answer arrived (monotonic). The endpoint counted between the request's send
    #: and its answer; counting the refill from the answer never assumes more than there
    #: is, where the send's time did as long as a busy machine held the request back.
    counted_at: float
    taken_before: float  # reservations up to and with the answered request

    @property
    def counted_rate(self) -> float:
        """The refill counted on: a little under what the headers imply (`_RATE_MARGIN`)."""
        return self.rate * _RATE_MARGIN

    def available(self, now: float, taken: float) -> float:
        refilled = self.remaining + self.counted_rate * (now - self.counted_at)
        return min(self.limit, refilled) - (taken - self.taken_before)

    def wait_for(self, cost: float, now: float, taken: float) -> float:
        """Seconds until this budget covers `cost` (a cost above the whole limit waits for a
        full budget, then goes)."""
        short = min(cost, self.limit) - self.available(now, taken)
        if short <= 0:
            return 0.0
        return short / self.counted_rate if self.rate > 0 else _WINDOW_S


@dataclass(frozen=True)
class Turn:
    """One request's place in its endpoint's pace, given back when it is answered."""

    taken: Mapping[str, float]  # reservations up to and with this request, per limit


#: The header of each limit (requests, tokens), OpenAI's then Anthropic's.
_OPENAI = {"requests": "x-ratelimit-{}-requests", "tokens": "x-ratelimit-{}-tokens"}
_ANTHROPIC = {
    "requests": "anthropic-ratelimit-requests-{}",
    "tokens": "anthropic-ratelimit-tokens-{}",
}


@dataclass
class PaceStats:
    """What an endpoint's limit cost an evaluation, for the report."""

    requests: int = 0
    throttled: int = 0  # answered 429
    waited: int = 0  # requests that waited for the limit
    longest_wait_s: float = 0.0
    limits: dict[str, float] = field(default_factory=dict)  # kind → its stated limit


class Pace:
    """The turns of one endpoint's requests (see the module's docstring).

    Args:
        name: the endpoint, for the report (`openai`, `http:my-agent`).
        clock: monotonic seconds; injectable for tests.
        wall: the current UTC time, to read Anthropic's reset times; injectable for tests.
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.name = name
        self.stats = PaceStats()
        self._clock = clock
        self._wall = wall
        self._budgets: dict[str, _Budget] = {}
        #: Running totals of what the turns taken so far reserved, per limit.
        self._taken = {"requests": 0.0, "tokens": 0.0}
        self._in_flight = 0  # turns taken and not given back
        self._most_in_flight: int | None = None  # None: no 429 yet, no bound of ours
        self._successes = 0
        self._paused_until = 0.0
        self._queue: deque[asyncio.Future[None]] = deque()

    async def take_turn(
        self, tokens: int, *, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ) -> Turn:
        """Wait for this endpoint's budget and a place among its requests in flight; the
        caller then sends and gives the turn back with `answered` or `failed`.

        The budget is reserved before the wait, so requests waiting together leave one by
        one as it refills, instead of all at once when the first could go.

        Args:
            tokens: what the request may count against a tokens-per-minute limit.
            sleep: how to wait for the budget (the retry policy's, which tests replace).
        """
        started = self._clock()
        while self._most_in_flight is not None and self._in_flight >= self._most_in_flight:
            waiter = asyncio.get_running_loop().create_future()
            self._queue.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._queue:
                    self._queue.remove(waiter)
        self._in_flight += 1
        costs = {"requests": 1.0, "tokens": float(tokens)}
        now = self._clock()
        wait = max(self._paused_until - now, self._budget_wait(costs, now))
        for kind, cost in costs.items():
            self._taken[kind] += cost
        taken = dict(self._taken)
        try:
            if wait > 0:
                await sleep(wait)
        except BaseException:
            self._in_flight -= 1
            self._wake()
            raise
        self.stats.requests += 1
        waited = self._clock() - started
        if waited >= _NOTICEABLE_WAIT_S:
            self.stats.waited += 1
            self.stats.longest_wait_s = max(self.stats.longest_wait_s, waited)
        return Turn(taken)

    def answered(self, turn: Turn, status: int, headers: Mapping[str, str]) -> None:
        """The endpoint answered the turn's request: learn its budget from the headers, and
        on 429 slow down."""
        self._in_flight -= 1
        self._read_budgets(turn, headers)
        if status == 429:
            self.stats.throttled += 1
            self._successes = 0
            # Without the endpoint's counts, fewer requests in flight is the one way to ask
            # less; one halving per refusal burst (the requests refused together are one
            # signal), as TCP halves its window once per loss event.
            if not self._budgets and self._clock() >= self._paused_until:
                self._most_in_flight = max(1, (self._in_flight + 1) // 2)
        elif self._most_in_flight is not None:
            self._successes += 1
            if self._successes >= self._most_in_flight:  # a whole window went through
                self._successes = 0
                self._most_in_flight += 1
        self._wake()

    def failed(self, turn: Turn) -> None:
        """The turn's request got no answer (a timeout, a broken connection)."""
        self._in_flight -= 1
        self._wake()

    def pause(self, seconds: float) -> None:
        """Ask nothing of this endpoint for `seconds` (what a 429's `Retry-After` asks)."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    def resume_after(self) -> float:
        """Seconds until the endpoint's budget is likely to take one more request."""
        now = self._clock()
        return max(
            self._paused_until - now, self._budget_wait({"requests": 1, "tokens": 1}, now), 0.0
        )

    @property
    def set_the_pace(self) -> bool:
        """Whether the endpoint's limit, rather than its answers, decided how fast it went."""
        return self.stats.throttled > 0 or self.stats.waited > 0

    def report(self) -> str:
        """One line on what the limit cost, e.g. "openai's rate limit (600 requests/min) set
        the pace, not the model: 580 of 612 requests waited for it (up to 3.2 s), 2 were
        answered 429"."""
        stats = self.stats
        stated = ", ".join(
            f"{limit:,.0f} {kind}/min" for kind, limit in sorted(stats.limits.items())
        )
        return (
            f"{self.name}'s rate limit{f' ({stated})' if stated else ''} set the pace, not the "
            f"model: {stats.waited:,} of {stats.requests:,} requests waited for it (up to "
            f"{stats.longest_wait_s:,.1f} s), {stats.throttled:,} were answered 429"
        )

    def _budget_wait(self, costs: Mapping[str, float], now: float) -> float:
        return max(
            (
                budget.wait_for(costs[kind], now, self._taken[kind])
                for kind, budget in self._budgets.items()
            ),
            default=0.0,
        )

    def _wake(self) -> None:
        """Let the waiting turns that now have a place in flight go, first come first."""
        room = (self._most_in_flight or sys.maxsize) - self._in_flight
        while self._queue and room > 0:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1

    def _read_budgets(self, turn: Turn, headers: Mapping[str, str]) -> None:
        lowered = {key.lower(): value for key, value in headers.items()}
        wall = self._wall()
        for family in (_OPENAI, _ANTHROPIC):
            for kind, pattern in family.items():
                try:
                    limit = float(lowered[pattern.format("limit")])
                    remaining = float(lowered[pattern.format("remaining")])
                except (KeyError, ValueError):
                    continue
                known = self._budgets.get(kind)
                if limit <= 0 or remaining < 0:
                    continue
                if known is not None and known.taken_before > turn.taken[kind]:
                    continue  # an answer to an older request than the last count's
                reset = _reset_seconds(lowered.get(pattern.format("reset"), ""), wall)
                missing = limit - remaining
                if reset and missing > 0:
                    rate = missing / reset
                elif known is not None:
                    rate = known.rate
                else:
                    rate = limit / _WINDOW_S
                self._budgets[kind] = _Budget(
                    limit, remaining, rate, self._clock(), turn.taken[kind]
                )
                self.stats.limits[kind] = limit

"""Scripts for the test servers: protocol-neutral steps (answer, tool calls, faults) and builders.

A step says what a server does with one request; each server renders it in its own wire
format, so one script drives OpenAI, Anthropic or an agent endpoint alike:

    server.script(*sql_then_answer("SELECT SUM(amount) FROM orders", "Revenue is 42."))
    server.set_script(by_turn(tool_calls(execute_sql("SELECT 1")), answer("One.")))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Tokens:
    """Usage a scripted completion reports. `cached` is part of `input`, as in `Usage`."""

    input: int = 100
    output: int = 20
    cached: int = 0


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted completion. A `str` `arguments` is sent verbatim (may be broken JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """What a server does with one request.

    Kinds: `reply` (a completion: `text` and/or `calls`, with `tokens`), `json` (`body` as JSON
    with `status`), `raw` (`body` as text with `status`), `hang` (wait `hang_s`, then close
    without answering), `reset` (close the connection with a TCP reset, no response),
    `drip` (a 200 whose body comes one byte every `hang_s`, for ever), `large` (a 200 JSON
    body of `size` bytes, gzip-encoded when `gzip`).
    `delay_s` is waited before anything else (latency); `headers` are added to the response.
    A `cut` reply says the token limit stopped it (OpenAI `finish_reason: length`, Anthropic
    `stop_reason: max_tokens`).
    """

    kind: Literal["reply", "json", "raw", "hang", "reset", "drip", "large"]
    text: str = ""
    calls: tuple[Call, ...] = ()
    tokens: Tokens = Tokens()
    status: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    hang_s: float = 0.0
    error_message: str | None = None  # set for errors: rendered in the protocol's error shape
    cut: bool = False
    size: int = 0
    gzip: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """One request a server received. `headers` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's `messages` (empty when there are none)."""
        return self.json.get("messages", []) if isinstance(self.json, dict) else []


Script = Sequence[Step] | Callable[[RecordedRequest, int], Step]


def call(name: str, arguments: Mapping[str, Any] | str | None = None, /, **kwargs: Any) -> Call:
    """A tool call: `call("execute_sql", sql_query="SELECT 1")` or with a dict / raw JSON text."""
    if arguments is None:
        return Call(name, dict(kwargs))
    return Call(name, arguments if isinstance(arguments, str) else {**arguments, **kwargs})


def execute_sql(sql: str) -> Call:
    """The built-in agent's `execute_sql` call."""
    return Call("execute_sql", {"sql_query": sql})


def answer(
    text: str, *, tokens: Tokens = Tokens(), delay_s: float = 0.0, cut: bool = False
) -> Step:
    """A final text completion; `cut`: stopped by the token limit."""
    return Step("reply", text=text, tokens=tokens, delay_s=delay_s, cut=cut)


def tool_calls(
    *calls: Call | tuple[str, Mapping[str, Any] | str],
    text: str = "",
    tokens: Tokens = Tokens(),
    delay_s: float = 0.0,
    cut: bool = False,
) -> Step:
    """A completion asking for one or several (parallel) tool calls, optionally with text;
    `cut`: stopped by the token limit (give the arguments as broken JSON text then)."""
    made = tuple(c if isinstance(c, Call) else Call(c[0], c[1]) for c in calls)
    return Step("reply", text=text, calls=made, tokens=tokens, delay_s=delay_s, cut=cut)


def sql_then_answer(sql: str, text: str, *, tokens: Tokens = Tokens()) -> list[Step]:
    """Two steps: call `execute_sql` with `sql`, then answer `text`."""
    return [tool_calls(execute_sql(sql), tokens=tokens), answer(text, tokens=tokens)]


def error(
    status: int,
    message: str = "scripted failure",
    *,
    retry_after: str | float | None = None,
    headers: Mapping[str, str] | None = None,
    delay_s: float = 0.0,
) -> Step:
    """An error status with a body in the protocol's error shape, optionally with Retry-After."""
    extra = dict(headers or {})
    if retry_after is not None:
        extra["Retry-After"] = str(retry_after)
    return Step(
        "json",
        status=status,
        headers=tuple(extra.items()),
        error_message=message,
        delay_s=delay_s,
    )


def rate_limited(retry_after: str | float | None = None) -> Step:
    """HTTP 429, optionally with Retry-After."""
    return error(429, "Rate limit reached; slow down", retry_after=retry_after)


def hang(seconds: float = 5.0) -> Step:
    """Read the request, then send nothing for `seconds` (longer than the client's timeout)."""
    return Step("hang", hang_s=seconds)


def reset() -> Step:
    """Read the request, then reset the connection without a response."""
    return Step("reset")


def drip(every_s: float = 0.2) -> Step:
    """HTTP 200, then one body byte every `every_s` until the client gives up."""
    return Step("drip", hang_s=every_s)


def large_body(size: int, *, gzip: bool = False) -> Step:
    """HTTP 200 with a JSON body of `size` bytes (decompressed), gzip-encoded when `gzip`."""
    return Step("large", size=size, gzip=gzip)


def not_json(body: str = "<html><body>502 Bad Gateway</body></html>") -> Step:
    """HTTP 200 whose body is not JSON."""
    return Step("raw", body=body)


def json_body(body: Any, *, status: int = 200, delay_s: float = 0.0) -> Step:
    """Any JSON body, verbatim (e.g. a 200 lacking `choices`, or an agent reply)."""
    return Step("json", body=body, status=status, delay_s=delay_s)


def missing_fields() -> Step:
    """HTTP 200 with JSON lacking what every protocol needs (`choices`, `content`, `text`)."""
    return json_body({"id": "resp_1", "object": "unexpected"})


def agent_reply(text: str, *, delay_s: float = 0.0, **fields: Any) -> Step:
    """An agent-protocol reply: `text` plus any of tool_calls, queries, answer, usage, cost_usd."""
    return json_body({"text": text, **fields}, delay_s=delay_s)


def by_turn(*steps: Step) -> Callable[[RecordedRequest, int], Step]:
    """A stateless script: the step is chosen by how many assistant turns the request holds.

    Many conversations can then run at once against one server, each getting its own
    tool call first and its answer second.
    """

    def choose(request: RecordedRequest, _index: int) -> Step:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        return steps[turn] if turn < len(steps) else exhausted(f"no step for turn {turn}")

    return choose


def repeat(step: Step) -> Callable[[RecordedRequest, int], Step]:
    """A script answering every request with `step`."""
    return lambda _request, _index: step


def exhausted(why: str) -> Step:
    # 418 is never retried, so a test with a short script fails at once with this message.
    return Step("json", status=418, error_message=f"test server script exhausted: {why}")

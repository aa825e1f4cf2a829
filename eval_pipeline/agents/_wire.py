"""Reading response bodies: JSON decoding and field checks that raise ProtocolError naming the field."""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

import httpx

from eval_pipeline.agents._errors import ProtocolError, scrub
from eval_pipeline.agents._retry import secret_header_values
from eval_pipeline.suite import redact, truncate

__all__ = ["MAX_COUNT", "BodyReader", "parse_arguments"]

# The store keeps counts as 64-bit integers; a reply claiming more is broken, not huge.
MAX_COUNT = 2**63 - 1

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


class BodyReader:
    """The JSON body of one successful response, read field by field.

    Every failed check raises `ProtocolError` saying which field was wrong, what was expected
    and what came instead, so a person fixing an agent endpoint knows what to change.
    """

    def __init__(self, response: httpx.Response, *, endpoint: str) -> None:
        self.response = response
        self.endpoint = endpoint
        try:
            self.body: Any = json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            self.fail(f"the body is not JSON (it starts with {self._snippet()!r})")

    def fail(self, problem: str) -> NoReturn:
        """Raise `ProtocolError` for this response."""
        request = self.response.request
        raise ProtocolError(
            scrub(problem, secret_header_values(request.headers)),
            endpoint=self.endpoint,
            url=str(request.url),
            method=request.method,
            status_code=self.response.status_code,
        )

    def root(self) -> dict[str, Any]:
        """The body, which must be a JSON object."""
        if not isinstance(self.body, dict):
            self.fail(f"the body must be a JSON object, got {_describe(self.body)}")
        return self.body

    def field(
        self,
        container: dict[str, Any],
        key: str,
        path: str,
        expected: type | tuple[type, ...],
        *,
        required: bool = True,
        default: Any = None,
    ) -> Any:
        """`container[key]`, checked to be of the `expected` type(s).

        Args:
            container: the object holding the field.
            key: the field's key.
            path: the field's full path for messages, e.g. ``choices[0].message``.
            expected: accepted types; `bool` is never accepted as a number.
            required: whether a missing or null field (unless `type(None)` is expected)
                is an error; otherwise `default` is returned.
            default: the value of an optional field that is missing.
        """
        if key not in container:
            if required:
                self.fail(f"missing field `{path}`")
            return default
        value = container[key]
        if value is None and not _accepts_none(expected):
            if required:
                self.fail(f"`{path}` must be {_names(expected)}, got null")
            return default
        if not is_instance(value, expected):
            self.fail(f"`{path}` must be {_names(expected)}, got {_describe(value)}")
        return value

    def count(self, container: dict[str, Any], key: str, path: str) -> int:
        """An optional token count (0 when missing): an integer the store can hold."""
        value = self.field(container, key, path, int, required=False, default=0)
        if not 0 <= value <= MAX_COUNT:
            self.fail(f"`{path}` must be an integer from 0 to {MAX_COUNT}, got {value:.3g}")
        return value

    def amount(self, container: dict[str, Any], key: str, path: str) -> float | None:
        """An optional amount (a cost in USD): a finite number, not negative."""
        value = self.field(container, key, path, float, required=False)
        if value is None:
            return None
        if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
            self.fail(f"`{path}` must be a finite number of at least 0, got {value!r}")
        return float(value)

    def _snippet(self, limit: int = 60) -> str:
        # Scrubbed before it is cut to `limit`, so a key at the cut is still recognised.
        text = self.response.content[: limit + 4096].decode("utf-8", errors="replace")
        return scrub(text, secret_header_values(self.response.request.headers))[:limit]


def is_instance(value: Any, expected: type | tuple[type, ...]) -> bool:
    """`isinstance` where a boolean is never a number (JSON `true` is not `1`)."""
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool):
        return bool in types
    if float in types and isinstance(value, int):
        return True
    return isinstance(value, types)


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Tool-call arguments from the model's JSON text; None when they are not a JSON object.

    Models do produce broken JSON; the agent loop then tells the model instead of failing.
    """
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def _accepts_none(expected: type | tuple[type, ...]) -> bool:
    return type(None) in (expected if isinstance(expected, tuple) else (expected,))


def _names(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def _describe(value: Any) -> str:
    # Redacted before the cut: a cut key is still a key.
    shown = truncate(redact(json.dumps(value, default=str)[:4096]), 40)
    return f"{_names(type(value))} ({shown})"

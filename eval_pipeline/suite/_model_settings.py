"""A model's request settings (`settings:` of a configured model): read, checked, and named per protocol.

nao lets each model carry `settings` (temperature, max_tokens, reasoning_effort, ...) that its
backend sends with every request. We send them too, as fields of the request body of the
protocol that has them, so a nao project keeps the sampling it was tuned with. A setting that
the model's protocol has no field for is a load problem: dropping it silently would evaluate
another configuration than the one the user wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval_pipeline.suite._parse import FieldReader

__all__ = ["read_model_settings"]

_EFFORTS = ("minimal", "low", "medium", "high")


def _fraction_up_to(top: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return None if number and 0 <= value <= top else f"a number from 0 to {top:g}"

    return check


def _whole(value: Any) -> str | None:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return None if whole and 0 <= value < 2**63 else "a whole number ≥ 0"


def _positive_whole(value: Any) -> str | None:
    whole = isinstance(value, int) and not isinstance(value, bool)
    return None if whole and 0 < value < 2**31 else "a whole number ≥ 1"


def _effort(value: Any) -> str | None:
    return None if value in _EFFORTS else "one of " + ", ".join(_EFFORTS)


#: Per protocol, the settings its request body has a field for, and what each accepts.
_KNOWN: dict[str, dict[str, Callable[[Any], str | None]]] = {
    "openai": {
        "temperature": _fraction_up_to(2.0),
        "top_p": _fraction_up_to(1.0),
        "seed": _whole,
        "reasoning_effort": _effort,
    },
    "anthropic": {
        "temperature": _fraction_up_to(1.0),
        "top_p": _fraction_up_to(1.0),
        "top_k": _positive_whole,
    },
}


def read_model_settings(
    r: FieldReader, spec: dict, field: str, *, protocol: str
) -> tuple[tuple[tuple[str, Any], ...], int | None]:
    """A model's `settings` mapping → (request fields, max_tokens).

    `max_tokens` is taken out: it is the model's completion cap, which every protocol has and
    which the error of a cut reply names. Each other key must be a field of `protocol`'s
    request; anything else is a problem naming the field and the settings that protocol takes.

    Args:
        r: the reader of the file the settings are in (problems carry its name and lines).
        spec: the model's mapping, holding `settings`.
        field: the model's field path (`llm.providers[0].models[1]`).
        protocol: `openai` (Chat Completions) or `anthropic` (Messages).
    """
    settings = spec.get("settings")
    if settings is None:
        return (), None
    where = f"{field}.settings"
    if not isinstance(settings, dict):
        r.problem(where, "expected a mapping of request settings", r.line_of(spec, "settings"))
        return (), None
    known = _KNOWN[protocol]
    fields: list[tuple[str, Any]] = []
    max_tokens = None
    for key, value in settings.items():
        line = r.line_of(settings, key)
        if key == "max_tokens":
            max_tokens = r.integer(settings, key, f"{where}.max_tokens", minimum=1)
            continue
        check = known.get(key)
        if check is None:
            takes = ", ".join(["max_tokens", *known])
            r.problem(
                f"{where}.{key}",
                f"is not a setting of the {protocol} protocol's requests; it takes {takes}",
                line,
            )
            continue
        expected = check(value)
        if expected is not None:
            r.problem(f"{where}.{key}", f"expected {expected}, got {value!r}", line)
            continue
        fields.append((str(key), value))
    return tuple(sorted(fields)), max_tokens

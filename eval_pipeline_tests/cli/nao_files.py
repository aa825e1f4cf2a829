"""Results files compared by shape: every key path of a JSON document and the kinds of value found there."""

from __future__ import annotations


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def key_paths(value: object, path: str = "") -> dict[str, set[str]]:
    """Every key path (list items as `[]`) → the kinds of value found there."""
    found: dict[str, set[str]] = {path: {_kind(value)}} if path else {}
    children = (
        value.items()
        if isinstance(value, dict)
        else (("[]", v) for v in value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        sub = f"{path}[]" if key == "[]" else f"{path}.{key}" if path else key
        for p, kinds in key_paths(child, sub).items():
            found.setdefault(p, set()).update(kinds)
    return found

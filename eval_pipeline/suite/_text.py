"""Text cut to fit a message: a length cap, and the first line of a longer text."""

from __future__ import annotations

__all__ = ["first_line", "truncate"]


def truncate(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first `limit - 1` and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of `text`, stripped, cut to `limit` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return truncate(line, limit)

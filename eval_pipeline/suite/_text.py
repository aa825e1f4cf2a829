"""Text made fit to show: cut to a length, its first line, its control characters as escapes."""

from __future__ import annotations

import re

__all__ = ["first_line", "printable", "truncate"]

# Characters that are orders to whatever shows the text rather than text: C0 controls (ESC
# starts the sequences a terminal obeys: OSC 52 writes the clipboard, CSI 2J clears the
# screen; a carriage return overwrites the line), DEL, C1 controls (CSI is one), the
# bidirectional embeddings, overrides and isolates (they reorder what a line shows), and what
# XML cannot hold (lone surrogates, U+FFFE, U+FFFF). A tab stays a tab.
_NOT_TEXT = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
# Where text may span lines, a line end is `\n` or `\r\n`; a carriage return alone is not.
_CONTROLS = re.compile(f"\r(?!\n)|[{_NOT_TEXT}]")
_CONTROLS_AND_LINE_ENDS = re.compile(f"[\n\r{_NOT_TEXT}]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with each control character shown as its escape (`\\x1b`, `\\r`), so text from
    an agent, a results file or the store prints as what it says on a terminal, and a JUnit
    file holding it stays well-formed XML. The one function every surface that shows such
    text calls.

    Args:
        lines: keep line ends (`\\n`, `\\r\\n`), for text shown on several lines (a reply,
            a data diff); otherwise a line end is shown as `\\n` too, so a name never starts
            a line of its own that reads like another row of the report.
    """
    return (_CONTROLS if lines else _CONTROLS_AND_LINE_ENDS).sub(_escape, text)


def truncate(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first `limit - 1` and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of `text`, stripped, cut to `limit` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return truncate(line, limit)

"""How questions and answers are compared without a model: content words, their overlap, the numbers an answer gives, the tables a query reads, an error's shape."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = [
    "error_shape",
    "numbers_in",
    "overlap",
    "tables_in",
    "words",
]

_WORD = re.compile(r"[a-z0-9_]+")
# Words that do not change what is asked ("total", "average", "count" do: they stay).
_STOP_TEXT = """a an the and or of in on at to for by with from per is are was were be been do
does did what which who whom whose how many much when where why show me give tell list get find
please can could would you your our we us i my it its this that these those there their them
than then as into over under up down all any each every some between during about across
also just only"""
_STOP = frozenset(_STOP_TEXT.split())
_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?%?")
# FROM/JOIN followed by a (schema-qualified, maybe quoted) name; a subquery's "(" is skipped.
_TABLE = re.compile(
    r"\b(?:from|join)\s+((?:[`\"\[]?[\w$]+[`\"\]]?\.){0,2}[`\"\[]?[\w$]+[`\"\]]?)", re.IGNORECASE
)
_CTE = re.compile(r"\b(\w+)\s+as\s*\(", re.IGNORECASE)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_DIGITS = re.compile(r"\b\d+(?:\.\d+)?\b")
_SPACE = re.compile(r"\s+")


def words(text: str) -> frozenset[str]:
    """The content words of a question: lower case, stop words out, a plural's `s` off."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 2:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return frozenset(found)


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """How alike two word sets are, 0 to 1 (their cosine as sets)."""
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


def numbers_in(text: str) -> tuple[str, ...]:
    """The figures an answer states, as written without separators, in order."""
    return tuple(n.replace(",", "") for n in _NUMBER.findall(text))


def tables_in(sql: str | None) -> tuple[str, ...]:
    """The tables a query reads (FROM and JOIN), bare names in lower case, a CTE's own name
    left out, in order of first mention."""
    if not sql:
        return ()
    ctes = {name.lower() for name in _CTE.findall(sql)}
    found: list[str] = []
    for name in _TABLE.findall(sql):
        bare = name.split(".")[-1].strip('`"[]').lower()
        if bare and bare not in ctes and bare not in found:
            found.append(bare)
    return tuple(found)


def error_shape(error: str) -> str:
    """An error as its kind, the same for every query that meets it: literals and numbers
    out, identifiers kept, one line, at most 160 characters."""
    text = _QUOTED.sub("'?'", error.strip().splitlines()[0] if error.strip() else "")
    text = _DIGITS.sub("N", text)
    return _SPACE.sub(" ", text).strip().lower()[:160]


def mentioned(names: Iterable[str], text: str) -> list[str]:
    """The `names` that `text` mentions as words."""
    lowered = text.lower()
    return [n for n in names if re.search(rf"\b{re.escape(n.lower())}\b", lowered)]

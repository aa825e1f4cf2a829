"""How questions and answers are compared without a model: content words, their overlap, the numbers an answer gives, the tables a query reads, an error's shape."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

__all__ = [
    "WordGroups",
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


class WordGroups:
    """Questions grouped by their words: a question joins the group whose first question is
    most alike it (`overlap`; the earliest group on a tie) when at least `alike`, else starts
    a group of its own. Only the groups sharing a word with it are compared, through an
    index of their words."""

    def __init__(self, alike: float) -> None:
        self.alike = alike
        self.firsts: list[frozenset[str]] = []
        self._by_word: dict[str, list[int]] = {}

    def best(self, asked: frozenset[str]) -> tuple[int | None, float]:
        """The group most alike `asked` among those sharing a word with it, and how alike
        (None and 0 when none shares one)."""
        best, best_overlap = None, 0.0
        for group in sorted({g for word in asked for g in self._by_word.get(word, ())}):
            alike = overlap(asked, self.firsts[group])
            if best is None or alike > best_overlap:
                best, best_overlap = group, alike
        return best, best_overlap

    def add(self, first: frozenset[str]) -> int:
        """A new group, `first` its first question; its index."""
        self.firsts.append(first)
        for word in first:
            self._by_word.setdefault(word, []).append(len(self.firsts) - 1)
        return len(self.firsts) - 1

    def place(self, asked: frozenset[str]) -> int:
        """The index of the group `asked` belongs to (a new one when none is alike)."""
        group, alike = self.best(asked)
        return group if group is not None and alike >= self.alike else self.add(asked)

"""Problems found in a suite, reported all at once, each naming the file, field and expectation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one test file (or CSV row, or config file)."""

    source: str
    field: str | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {what}{self.message}"


class SuiteError(Exception):
    """The suite cannot run: every problem found is listed, nothing has been run or written."""

    def __init__(self, problems: Sequence[Problem], *, headline: str | None = None) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        self.headline = headline or (
            f"{count} problem{'s' if count != 1 else ''} in the test suite; nothing was run"
        )
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join([self.headline, *(f"  {p}" for p in self.problems)])


class SelectionError(SuiteError):
    """A `--select` entry matches no test name, file stem or subfolder."""

    def __init__(self, unknown: Sequence[str], available: Sequence[str]) -> None:
        shown = ", ".join(available) if available else "(the suite has no tests)"
        problems = [
            Problem("--select", None, f"no test, file or folder named {name!r}") for name in unknown
        ]
        super().__init__(problems, headline=f"unknown test selection; available tests: {shown}")
        self.unknown = tuple(unknown)
        self.available = tuple(available)

"""Problems found in a suite, reported all at once, each naming the file, field and expectation;
and the one line any error is told in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval_pipeline.suite._text import first_line


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


def describe_error(error: BaseException) -> str:
    """One line saying what failed, without a traceback."""
    if isinstance(error, OSError) and error.strerror:
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror}{where}"
    # Anything else (a SQLAlchemy error from Dagster's event log, a DuckDB I/O error, a bug):
    # its type and first line name the cause; the rest is in the log.
    return f"{type(error).__name__}: {first_line(str(error))}"

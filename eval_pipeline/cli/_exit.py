"""The exit codes of `eval-pipeline`, and the one place that turns an error into a code and a line."""

from __future__ import annotations

import sys
import tempfile
import traceback
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path

from eval_pipeline.suite import SuiteError, describe_error, first_line, printable

ERROR_LOG = "eval-pipeline-errors.log"


class ExitCode(IntEnum):
    """What a CI gate reads (README "Exit codes" says the same)."""

    OK = 0  # every test passed, or the accuracy gate was met
    FAILED = 1  # a test failed, or the accuracy gate was missed
    USAGE = 2  # a mistake in the command, the configuration or the test files
    # The evaluation could not run, or some of its runs ended in an error (without
    # --allow-errors): the machinery failed, not the agent.
    NOT_RUN = 3
    INTERRUPTED = 130  # Ctrl-C, as a shell reports it


class CouldNotRun(Exception):
    """The command could not do its work for a reason outside the suite's files (a failed
    pipeline step, a damaged warehouse, a full disk). The message is the one line a person
    reads; `details` (a traceback, a Dagster error) go to the error log."""

    def __init__(self, message: str, *, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details


def describe(error: BaseException) -> str:
    """One line saying what failed, without a traceback."""
    if isinstance(error, CouldNotRun):
        return first_line(str(error), limit=1000)
    return describe_error(error)


def _save_details(error: BaseException, log: Path | None) -> Path | None:
    stack = "".join(traceback.format_exception(error))
    details = getattr(error, "details", None)
    text = f"--- {datetime.now(UTC).isoformat()} ---\n{stack}" + (
        f"\n{details}\n" if details else ""
    )
    for path in (log, Path(tempfile.gettempdir()) / ERROR_LOG):
        if path is None:
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(text)
            return path
        except OSError:  # the disk that failed may be the log's: try the next place
            continue
    return None


def report_error(error: Exception, *, command: str, log: Path | None) -> ExitCode:
    """Print one line for `error` on stderr and return its exit code: a mistake in the
    command, configuration or test files is 2; anything that stopped the work is 3, with its
    traceback appended to `log` (the suite's `.eval/logs/`) instead of the terminal."""
    if isinstance(error, SuiteError):
        print(f"error: {printable(error.render(), lines=True)}", file=sys.stderr)
        return ExitCode.USAGE
    saved = _save_details(error, log)
    where = f"details in {saved}" if saved else "the details could not be saved"
    print(
        f"error: eval-pipeline {command} could not run: {printable(describe(error))} "
        f"({where}; --debug shows the traceback)",
        file=sys.stderr,
    )
    return ExitCode.NOT_RUN

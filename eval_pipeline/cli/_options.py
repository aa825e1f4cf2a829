"""Option values checked where they are read, so a typo is a usage error (exit 2), not a crash."""

from __future__ import annotations

import argparse
import math
from datetime import date
from pathlib import Path

from eval_pipeline.suite import Problem, SuiteError, find_suite_root


def suite_root(args: argparse.Namespace) -> Path:
    """The `--suite` folder, else the one found from the current folder (see `find_suite_root`)."""
    return Path(args.suite).resolve() if args.suite else find_suite_root()


def bad_option(option: str, message: str) -> SuiteError:
    return SuiteError([Problem(option, None, message)], headline="bad option; nothing was done")


def parse_day(text: str, option: str = "--date") -> date:
    """A YYYY-MM-DD option value."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise bad_option(option, f"expected YYYY-MM-DD, got {text!r}") from None


def output_file(text: str | None, option: str = "-o") -> Path | None:
    """An output file whose folder exists, checked before any work (an evaluation may take
    an hour; finding then that its report cannot be written wastes it)."""
    if text is None:
        return None
    path = Path(text)
    if path.is_dir():
        raise bad_option(option, f"{text} is a folder; give a file name")
    if not path.parent.is_dir():
        raise bad_option(option, f"the folder {path.parent} does not exist")
    return path


def port_number(text: str) -> int:
    """An argparse type: a TCP port (argparse turns the error into a usage line, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"expected a port between 1 and 65535, got {port}")
    return port


#: The longest wait an option may ask for: a day. Past it a wait is a typo, and Python's
#: waits refuse a timeout beyond about 292 years (`inf` or `1e300` broke the query).
MAX_WAIT_S = 86_400


def seconds(text: str) -> float:
    """An argparse type: a wait in seconds, more than 0 and at most MAX_WAIT_S (a NaN or a
    negative one would stop every query at once, saying it ran "nan s")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_WAIT_S):
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds above 0 and at most {MAX_WAIT_S:,}, got {text!r}"
        )
    return value

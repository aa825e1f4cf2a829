"""Grades: the outcome of each check on a run, and the verdict they add up to."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from enum import StrEnum
from typing import Any

from eval_pipeline.suite import CheckKind


class GradeStatus(StrEnum):
    """`failed` means the agent was wrong; `error` means we could not tell (infrastructure).

    `skipped` is a check's only, never a grade's: a judged check not asked because another
    check had already failed the run (`Grader`'s `judge_failed_runs`)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check; `status` ERROR when it could not be decided (judge down...)."""

    kind: CheckKind
    status: GradeStatus
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    judge: str | None = None  # the judge (model and prompt version) that decided it, if any
    #: An error because the judge or extraction model did not answer (unreachable,
    #: rate-limited, timed out): the next evaluation grades the run again. Every other error
    #: (an answer without a verdict among them) stands until an input changes or `--rejudge`.
    retry: bool = False


@dataclass(frozen=True)
class Verdict:
    status: GradeStatus
    message: str
    verified: bool  # False: the case has no check at all ("no verification", passes, flagged)


def combine(checks: list[CheckResult]) -> Verdict:
    """Every check present must pass. A definite failure outranks an undecided check: one wrong
    answer is enough to know the run failed, whatever a judge outage hid elsewhere."""
    if not checks:
        return Verdict(GradeStatus.PASSED, "no verification: the test has no check", verified=False)
    failed = [c for c in checks if c.status is GradeStatus.FAILED]
    if failed:
        return Verdict(GradeStatus.FAILED, "; ".join(c.message for c in failed), verified=True)
    errors = [c for c in checks if c.status is GradeStatus.ERROR]
    if errors:
        return Verdict(GradeStatus.ERROR, "; ".join(c.message for c in errors), verified=True)
    message = checks[0].message if len(checks) == 1 else f"all {len(checks)} checks passed"
    return Verdict(GradeStatus.PASSED, message, verified=True)


def check_to_dict(check: CheckResult) -> dict[str, Any]:
    """A check as a grade stores it: `details` copied as `dataclasses.asdict` would, `retry`
    only where it is true."""
    data = {
        "kind": check.kind,
        "status": check.status.value,
        "message": check.message,
        "details": _plain(check.details),
        "judge": check.judge,
    }
    if check.retry:  # stored only where it says something
        data["retry"] = True
    return data


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """`value` copied as `dataclasses.asdict` copies a field, dataclasses made dicts, but
    without its deep copy of every text and number (a third of grading a run took)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    if kind is list:
        return [_plain(item) for item in value]
    if isinstance(value, str | int | float):  # enums of text or numbers
        return value
    if isinstance(value, dict):
        return kind((key, _plain(item)) for key, item in value.items())
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return kind(_plain(item) for item in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)


def grade_retried(status: str, checks: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether the next evaluation grades a stored grade again though nothing changed: an
    error with no check (the run itself failed: it is run again) or with a check that says
    `retry` (the judge or extraction model did not answer)."""
    if status != GradeStatus.ERROR:
        return False
    return not checks or any(check.get("retry") for check in checks)

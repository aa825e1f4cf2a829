"""The grading checks a test file may declare, as the suite reads them: one registry of adapters.

A check is one adapter (`eval_pipeline.grading.Check`); the suite needs only its test-file
half, named here: the fields it reads and how it parses them. The grading half (how it
decides a run) lives with the grading code, which the suite never imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eval_pipeline.suite._registry import Registry

if TYPE_CHECKING:
    from eval_pipeline.suite._parse import FieldReader

#: The entry-point group a package adds grading checks to.
CHECKS_GROUP = "eval_pipeline.checks"


@runtime_checkable
class TestFileCheck(Protocol):
    """What the suite asks of a grading check: its name and its part of a test file."""

    #: The check's name: its kind in grades and results files, and (for a check added
    #: through the registry) the test-file field it reads.
    name: str
    #: The test-file fields this check reads; a test declares the check by giving any of them.
    fields: tuple[str, ...]

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> Any | None:
        """The check's settings from a test file's data, or None after telling `reader` each
        problem (with its field and line)."""
        ...


CHECKS: Registry[TestFileCheck] = Registry(
    CHECKS_GROUP,
    {
        # The order a grade lists its checks in.
        "data": "eval_pipeline.grading._data_check:DataCheck",
        "assertions": "eval_pipeline.grading._builtin_checks:AssertionsCheck",
        "tool_calls": "eval_pipeline.grading._builtin_checks:ToolCallsCheck",
        "evaluators": "eval_pipeline.grading._builtin_checks:EvaluatorsCheck",
        "consistency": "eval_pipeline.grading._builtin_checks:ConsistencyCheck",
    },
    name_of=lambda check: check.name,
    accepts=lambda check: isinstance(check, TestFileCheck),
)


def register_check(check: TestFileCheck) -> TestFileCheck:
    """Add a grading check in this process (as a package does with an entry point in the
    `eval_pipeline.checks` group); `unregister_check(check.name)` removes it."""
    return CHECKS.register(check)


def unregister_check(name: str) -> None:
    CHECKS.unregister(name)

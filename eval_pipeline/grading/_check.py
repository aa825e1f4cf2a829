"""A grading check: the one interface every check of a test file is an adapter behind, and what it is given to decide a run."""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from eval_pipeline.grading._extraction import Strategy
from eval_pipeline.grading._judges import Judge
from eval_pipeline.grading._reference import ReferenceResult
from eval_pipeline.grading._verdict import CheckResult
from eval_pipeline.suite import CHECKS, Case, ExtensionError, FieldReader, Problem, Tolerance

if TYPE_CHECKING:
    from eval_pipeline.agents import AgentRun, ChatModel
    from eval_pipeline.sandbox import SqlSandbox

#: The warehouse variants of a case's semantic check, opened, or why there are none.
VariantSource = Callable[[Case], "Sequence[SqlSandbox] | str"]


@dataclass(frozen=True)
class CheckContext:
    """What a check may use besides its settings and the run: the test, the day's reference
    result of its SQL, the judge and the suite's grading rules (`GradingRules`)."""

    case: Case
    reference: ReferenceResult | None
    #: The judge of judged checks (evaluators, `llm_judge` arguments, consistency); None
    #: without `test.judge_model`: a check that needs one is then an error, not a failure.
    judge: Judge | None
    #: The model behind the judge, also the extraction model; its label signs judged checks.
    judge_model: ChatModel | None
    judge_label: str | None
    extraction: Strategy
    tolerance: Tolerance
    variants: VariantSource | None


class Check(ABC):
    """One grading check, as a test file declares it and as it decides a run.

    A check is one class: its `name` (the kind its results carry in grades and results
    files), the test-file `fields` it reads and how (`parse`, reporting each mistake with its
    field and line), and how it decides a run (`grade`) or every run of a test at once
    (`grade_runs`, when `across_runs`). It is found through the registry (built-in, an entry
    point in the `eval_pipeline.checks` group, or `register_check`); nothing else in the
    pipeline names it. What it returns is a `CheckResult`: passed, failed (the agent was
    wrong) or error (it could not tell), a one-line message, and `details` that the grade,
    the results file and the viewer keep as they are.
    """

    #: The check's name in grades, results files and (added checks) test files.
    name: ClassVar[str]
    #: A check decided once from every run of a test (consistency), not run by run.
    across_runs: ClassVar[bool] = False

    @property
    def fields(self) -> tuple[str, ...]:
        """The test-file fields it reads; a test declares the check by giving any of them."""
        return (self.name,)

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> Any | None:
        """The check's settings from a test file's data (its fields are in `data`): plain
        data or a frozen dataclass, which the test's content hash covers. On a mistake, tell
        `reader.problem(field, message, reader.line_of(container, key))` and return None."""
        return data[self.name]

    def settings(self, case: Case) -> Any | None:
        """The settings `case` gives this check, or None when it does not declare it."""
        return case.added_check(self.name)

    def asks_judge(self, settings: Any) -> bool:
        """Whether a judge decides it: such a check is asked after the others, and not at
        all for a run they already failed (unless `test.judge_failed_runs`)."""
        return False

    async def grade(self, settings: Any, run: AgentRun, context: CheckContext) -> CheckResult:
        """Decide one completed run (a run in error is never graded)."""
        raise NotImplementedError(f"check {self.name!r} grades no single run")

    async def grade_runs(
        self, settings: Any, runs: Sequence[AgentRun], context: CheckContext
    ) -> CheckResult:
        """Decide every completed run of a test at once (`across_runs`); each run's grade
        carries the one result."""
        raise NotImplementedError(f"check {self.name!r} grades no set of runs")

    def runs_needed(self, settings: Any) -> int:
        """The fewest attempts of a test that declares it (consistency compares n replies)."""
        return 1


def checks() -> tuple[Check, ...]:
    """Every grading check, built-ins first, in the order a grade lists them.

    Raises:
        ExtensionError: an entry point fails to load, or names no `Check`.
    """
    found = CHECKS.all()
    wrong = [check for check in found if not isinstance(check, Check)]
    if wrong:
        raise ExtensionError(
            [
                Problem(
                    f"check {check.name!r} ({type(check).__module__})",
                    None,
                    "is no eval_pipeline.grading.Check: it cannot grade a run",
                )
                for check in wrong
            ],
            headline=f"an extension of {CHECKS.group} is broken; nothing was run",
        )
    return found  # type: ignore[return-value]  # each is a Check, as just checked


def declared_checks(case: Case) -> list[tuple[Check, Any]]:
    """The checks `case` declares, each with its settings, in the order a grade lists them."""
    return [(check, s) for check in checks() if (s := check.settings(case)) is not None]


def runs_needed(case: Case) -> int:
    """The fewest attempts the checks of `case` need (1 when none asks for more)."""
    return max((check.runs_needed(s) for check, s in declared_checks(case)), default=1)

"""The grading rules: everything besides a test and its runs that decides a grade, each part named."""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.agents import endpoint_settings
from eval_pipeline.grading._judges import PROMPTS_VERSION, judge_label
from eval_pipeline.sandbox import sql_is_ordered
from eval_pipeline.suite import CHECKS, SuiteConfig, Tolerance

__all__ = ["GRADING_CODE_VERSION", "GradingRules", "grading_code"]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _code_version() -> str:
    """A digest of the grading code: this package's source and the rule that decides whether
    a query's rows are ordered. Any edit, a release or a patched checkout, regrades."""
    ordering = sys.modules[sql_is_ordered.__module__].__file__
    digest = hashlib.sha256()
    for path in [*sorted(Path(__file__).parent.glob("*.py")), Path(str(ordering))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


GRADING_CODE_VERSION = _code_version()


def grading_code() -> str:
    """The version of the code a grade is made with: this package's (`GRADING_CODE_VERSION`)
    and, when checks were added from outside it (an entry point's, one registered in this
    process), the source of each, so that an edit of an added check regrades as an edit of
    a built-in one does."""
    added = sorted(
        (check.name, type(check))
        for check in CHECKS.all()
        if not type(check).__module__.startswith(f"{_PACKAGE}.")
    )
    if not added:
        return GRADING_CODE_VERSION
    digest = hashlib.sha256(GRADING_CODE_VERSION.encode())
    for name, kind in added:
        source = inspect.getsourcefile(kind)
        code = Path(source).read_bytes() if source else kind.__qualname__.encode()
        digest.update(name.encode() + b"\0" + code)
    return digest.hexdigest()[:16]


_PACKAGE = __name__.split(".", 1)[0]


@dataclass(frozen=True)
class GradingRules:
    """How a suite's runs are graded, apart from what each test says.

    Args:
        tolerance: the suite's comparison defaults (`test.comparison`); a test's own wins.
        extraction: how the answer is taken from the agent's queries, as grading applies
            it (nao's `llm` extraction needs a judge model: without one, `last_query`).
        judge: who decides judged checks, with its prompts' version (`judge_label`); None
            without a judge model.
        judge_endpoint: the judge's server and request settings (`endpoint_settings`).
        judge_failed_runs: the judge is asked about runs another check already failed
            (`test.judge_failed_runs`); off, their judged checks are `skipped`.
        code: the grading code's version (`grading_code`).
    """

    tolerance: Tolerance
    extraction: str
    judge: str | None
    judge_endpoint: Mapping[str, Any]
    judge_failed_runs: bool = False
    code: str = GRADING_CODE_VERSION

    @classmethod
    def of(cls, config: SuiteConfig) -> GradingRules:
        settings = config.test
        judge = settings.judge_model
        return cls(
            tolerance=settings.comparison,
            extraction=settings.extraction if judge is not None else "last_query",
            judge=judge_label(judge) if judge is not None else None,
            judge_endpoint=endpoint_settings(config, judge) if judge is not None else {},
            judge_failed_runs=settings.judge_failed_runs,
            code=grading_code(),
        )

    def parts(self) -> dict[str, str]:
        """Each rule by the name the report gives it when it changes, as a short digest."""
        return {
            "tolerance": _digest(asdict(self.tolerance)),
            "extraction": _digest(self.extraction),
            "judge": _digest([self.judge, PROMPTS_VERSION, dict(self.judge_endpoint)]),
            "judge_failed_runs": _digest(self.judge_failed_runs),
            "grading code": self.code,
        }

    @property
    def settings_version(self) -> str:
        """One digest of the rules the configuration sets (all but the code): the data version
        of the `grading_rules` asset. The code's version is the grades' own code version."""
        return _digest({k: v for k, v in self.parts().items() if k != "grading code"})

    def describe(self) -> dict[str, Any]:
        """The rules as a person reads them (Dagster metadata, the store)."""
        return {
            "tolerance": asdict(self.tolerance),
            "extraction": self.extraction,
            "judge": self.judge or "(none)",
            "judge_endpoint": dict(self.judge_endpoint) or None,
            "judge_failed_runs": self.judge_failed_runs,
            "grading_code": self.code,
        }

    @staticmethod
    def changed(before: Mapping[str, str] | None, after: Mapping[str, str]) -> list[str]:
        """The names of the rules whose digests differ (none known before: none named; a rule
        the code before did not know is the grading code's change, named as that)."""
        if not before:
            return []
        return [name for name, digest in after.items() if name in before and before[name] != digest]

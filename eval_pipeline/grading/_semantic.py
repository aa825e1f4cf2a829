"""The semantic check: the reference and the agent's SQL re-run on warehouse variants must agree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from eval_pipeline.grading._compare import Comparison, compare_results
from eval_pipeline.grading._reference import frame_from_rows
from eval_pipeline.sandbox import QueryResult, SandboxError, SqlSandbox

__all__ = ["AgentQuery", "SemanticCheck", "semantic_check"]

Compare = Callable[[pd.DataFrame, pd.DataFrame], Comparison]
#: What produced the agent's answer, re-run on one variant when it is more than one query
#: (nao's extraction: the agent's queries, then the extraction query over their results).
AgentQuery = Callable[[SqlSandbox], QueryResult]


@dataclass(frozen=True)
class SemanticCheck:
    """The verdict of `semantic_check`.

    Attributes:
        status: `passed` (every usable variant agrees), `failed` (a variant disagrees or the
            agent's SQL fails on it) or `skipped` (nothing to check: no agent SQL, no
            variants, or the reference fails on every variant).
        message: One line for a person; on failure it names the variant and the first
            difference, e.g. "matches on the warehouse but not on variant 3: ...".
        variant: The first failing variant, numbered from 1; None unless failed.
    """

    status: Literal["passed", "failed", "skipped"]
    message: str
    variant: int | None = None

    @property
    def passed(self) -> bool:
        """Whether the check does not fail the test (a skipped check does not)."""
        return self.status != "failed"


def semantic_check(
    reference_sql: str,
    agent_sql: str | AgentQuery | None,
    variants: Sequence[SqlSandbox],
    compare: Compare = compare_results,
) -> SemanticCheck:
    """Re-run both queries on each warehouse variant and compare the answers there.

    Call it for a test whose answer already matched on the warehouse: an answer that matches
    there by coincidence (a hard-coded number, `max(id)` for a count) stops matching on a
    variant with other rows, while an equivalent query matches on every variant.

    Args:
        reference_sql: The test's reference query.
        agent_sql: The query that produced the agent's answer, or a function that produces it
            on a variant (`rerun_extraction`); None or empty skips the check (an external
            agent that sends only its answer).
        variants: Read-only sandboxes on the variants (`WarehouseVariants.open`), in order;
            the message numbers them from 1.
        compare: The test's comparison (`functools.partial(compare_results, ordered=...,
            decimals=...)`), called as `compare(actual, expected)`.

    Returns:
        A `SemanticCheck`. A variant on which the reference itself fails (a cast that the
        shifted data no longer fits) or returns more rows than the sandbox keeps says nothing
        about the agent and is left out; the message says how many were.
    """
    if agent_sql is None or (isinstance(agent_sql, str) and not agent_sql.strip()):
        return SemanticCheck("skipped", "skipped: the agent sent no SQL to re-run")
    if not variants:
        return SemanticCheck("skipped", "skipped: no warehouse variants")
    unusable: list[str] = []
    checked = 0
    for number, sandbox in enumerate(variants, start=1):
        try:
            expected = sandbox.execute(reference_sql)
        except SandboxError as error:
            unusable.append(f"variant {number}: the reference SQL fails there ({error.message})")
            continue
        try:
            actual = agent_sql(sandbox) if callable(agent_sql) else sandbox.execute(agent_sql)
        except SandboxError as error:
            return SemanticCheck(
                "failed",
                f"matches on the warehouse but not on variant {number}: the agent's SQL fails "
                f"there: {error.message}",
                number,
            )
        if expected.truncated or actual.truncated:
            unusable.append(f"variant {number}: a result is longer than the sandbox keeps")
            continue
        checked += 1
        comparison = compare(_frame(actual), _frame(expected))
        if not comparison.passed:
            return SemanticCheck(
                "failed",
                f"matches on the warehouse but not on variant {number}: {comparison.message}",
                number,
            )
    if not checked:
        return SemanticCheck("skipped", "skipped: no usable variant; " + "; ".join(unusable))
    message = f"agrees on all {checked} variant{'s' if checked != 1 else ''}"
    if unusable:
        message += f" ({len(unusable)} left out: {'; '.join(unusable)})"
    return SemanticCheck("passed", message)


def _frame(result: QueryResult) -> pd.DataFrame:
    return frame_from_rows(list(result.columns), [list(row) for row in result.rows])

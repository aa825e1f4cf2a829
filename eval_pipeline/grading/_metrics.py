"""Numbers over graded runs: pass@k per case, and per-model pass rate, cost, latency and ranking."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eval_pipeline.grading._verdict import GradeStatus


@dataclass(frozen=True)
class RunOutcome:
    """What metrics need of one graded run."""

    name: str
    model: str
    attempt: int
    status: GradeStatus
    tokens: int = 0
    cost_usd: float | None = None
    duration_ms: float = 0.0
    tool_call_count: int = 0
    verified: bool = True

    @classmethod
    def from_grade_row(cls, row: Mapping[str, Any]) -> RunOutcome:
        """From a `grades` row (the store's or a query's; a missing cost may come as NaN)."""
        cost = row["cost_usd"]
        return cls(
            name=row["name"],
            model=row["model"],
            attempt=int(row["attempt"]),
            status=GradeStatus(row["status"]),
            tokens=int(row["tokens"] or 0),
            cost_usd=None if cost is None or math.isnan(cost) else float(cost),
            duration_ms=float(row["duration_ms"] or 0.0),
            tool_call_count=int(row["tool_call_count"] or 0),
            verified=bool(row["verified"]),
        )


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of "at least one of k attempts passes": 1 − C(n−c, k) / C(n, k).

    Args:
        n: attempts made.
        c: attempts that passed.
        k: attempts the estimate is for (at most n).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 ≤ c ≤ n and 1 ≤ k ≤ n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class CaseMetrics:
    """One case × model over its attempts. `pass_hat_k` is pass^k: every attempt passed."""

    name: str
    model: str
    attempts: int
    passes: int
    errors: int
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: bool

    @property
    def flaky(self) -> bool:
        return 0 < self.passes < self.attempts


def case_metrics(outcomes: Iterable[RunOutcome], *, k: int | None = None) -> list[CaseMetrics]:
    """pass@1, pass@k (k defaults to the attempts made) and pass^k for each (case, model)."""
    groups: dict[tuple[str, str], list[RunOutcome]] = defaultdict(list)
    for outcome in outcomes:
        groups[(outcome.name, outcome.model)].append(outcome)
    metrics = []
    for (name, model), runs in groups.items():
        n = len(runs)
        c = sum(r.status is GradeStatus.PASSED for r in runs)
        metrics.append(
            CaseMetrics(
                name=name,
                model=model,
                attempts=n,
                passes=c,
                errors=sum(r.status is GradeStatus.ERROR for r in runs),
                pass_at_1=c / n,
                pass_at_k=pass_at_k(n, c, min(k or n, n)),
                pass_hat_k=c == n,
            )
        )
    return metrics


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class ModelSummary:
    """Every run of one model. `pass_rate` is a fraction; errors count as not passed.
    `cost_usd` is None when no run had a known price, and `cost_complete` says whether
    every run had one."""

    model: str
    total: int
    passed: int
    failed: int
    errors: int
    unverified: int
    pass_rate: float
    tokens: int
    cost_usd: float | None
    cost_complete: bool
    duration_p50_ms: float | None
    duration_p95_ms: float | None
    avg_duration_ms: float | None
    tool_calls: int
    avg_tool_calls: float | None


def summarize_models(outcomes: Iterable[RunOutcome]) -> list[ModelSummary]:
    """One summary per model, ranked by pass rate (high first), then cost (cheap first)."""
    groups: dict[str, list[RunOutcome]] = defaultdict(list)
    for outcome in outcomes:
        groups[outcome.model].append(outcome)
    summaries = []
    for model, runs in groups.items():
        costs = [r.cost_usd for r in runs if r.cost_usd is not None]
        durations = [r.duration_ms for r in runs]
        passed = sum(r.status is GradeStatus.PASSED for r in runs)
        summaries.append(
            ModelSummary(
                model=model,
                total=len(runs),
                passed=passed,
                failed=sum(r.status is GradeStatus.FAILED for r in runs),
                errors=sum(r.status is GradeStatus.ERROR for r in runs),
                unverified=sum(not r.verified for r in runs),
                pass_rate=passed / len(runs),
                tokens=sum(r.tokens for r in runs),
                cost_usd=sum(costs) if costs else None,
                cost_complete=len(costs) == len(runs),
                duration_p50_ms=percentile(durations, 50),
                duration_p95_ms=percentile(durations, 95),
                avg_duration_ms=sum(durations) / len(durations),
                tool_calls=sum(r.tool_call_count for r in runs),
                avg_tool_calls=sum(r.tool_call_count for r in runs) / len(runs),
            )
        )
    return rank_models(summaries)


def rank_models(summaries: Iterable[ModelSummary]) -> list[ModelSummary]:
    """Pass rate first; on a tie the cheaper model wins, and an unknown cost ranks last."""
    return sorted(
        summaries,
        key=lambda s: (-s.pass_rate, s.cost_usd is None, s.cost_usd or 0.0, s.model),
    )

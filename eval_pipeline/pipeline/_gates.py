"""Quality gates over results: minimum accuracy (oxy's average / all modes) and day-to-day regressions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from eval_pipeline.store import StoreLayout, read_latest

ThresholdMode = Literal["average", "all"]


@dataclass(frozen=True)
class AccuracyGate:
    passed: bool
    accuracy: float
    threshold: float | None
    mode: ThresholdMode
    below: list[tuple[str, float]] = field(default_factory=list)  # (case, accuracy) under the bar

    @property
    def message(self) -> str:
        if self.threshold is None:
            return f"accuracy {self.accuracy:.1%}; no minimum configured"
        if self.mode == "all":
            if not self.below:
                return f"every test at or above {self.threshold:.1%}"
            listed = ", ".join(f"{name}: {value:.1%}" for name, value in self.below[:20])
            return f"{len(self.below)} test(s) below threshold {self.threshold:.1%}: {listed}"
        verdict = "meets" if self.passed else "is below"
        return f"average accuracy {self.accuracy:.1%} {verdict} the minimum {self.threshold:.1%}"


def case_accuracies(outcomes: Iterable[tuple[str, bool]]) -> dict[str, float]:
    """(case, passed) per run → the share of each case's runs that passed."""
    runs: dict[str, list[bool]] = defaultdict(list)
    for name, passed in outcomes:
        runs[name].append(passed)
    return {name: sum(values) / len(values) for name, values in runs.items()}


def accuracy_gate(
    accuracies: dict[str, float], threshold: float | None, mode: ThresholdMode = "average"
) -> AccuracyGate:
    """oxy's semantics: `average` needs the mean of the tests' accuracies to reach the
    threshold, `all` needs every test to reach it. No threshold always passes."""
    average = sum(accuracies.values()) / len(accuracies) if accuracies else 0.0
    if threshold is None:
        return AccuracyGate(True, average, None, mode)
    below = sorted((name, value) for name, value in accuracies.items() if value + 1e-12 < threshold)
    passed = not below if mode == "all" else average + 1e-12 >= threshold
    return AccuracyGate(passed, average, threshold, mode, below if mode == "all" else [])


@dataclass(frozen=True)
class DayDiff:
    """Cases of one model compared between two days (a case passes when all its attempts pass)."""

    model: str
    base: date
    head: date
    improved: list[str]
    regressed: list[str]
    still_failing: list[str]
    base_found: bool


def case_status(layout: StoreLayout, model: str, day: date) -> dict[str, bool]:
    rows = read_latest(layout, "grades", model=model, run_date=day)
    status: dict[str, bool] = {}
    for row in rows:
        status[row["name"]] = status.get(row["name"], True) and bool(row["passed"])
    return status


def diff_days(
    layout: StoreLayout, model: str, base: date, head: date, *, names: Sequence[str] | None = None
) -> DayDiff:
    before, after = case_status(layout, model, base), case_status(layout, model, head)
    shared = [n for n in after if n in before and (names is None or n in names)]
    return DayDiff(
        model=model,
        base=base,
        head=head,
        improved=sorted(n for n in shared if not before[n] and after[n]),
        regressed=sorted(n for n in shared if before[n] and not after[n]),
        still_failing=sorted(n for n in shared if not before[n] and not after[n]),
        base_found=bool(before),
    )

"""Judge–human agreement: how often an LLM judge's verdicts match people's labels."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    """Raw agreement and Cohen's κ over n labelled items, with the confusion counts.

    κ corrects raw agreement for the agreement expected by chance from each side's
    pass rate; it is None when chance agreement is total (both sides gave one answer
    throughout), where κ is undefined.
    """

    n: int
    agreements: int
    raw: float | None
    kappa: float | None
    both_pass: int
    both_fail: int
    judge_pass_human_fail: int
    judge_fail_human_pass: int


def agreement(pairs: Iterable[tuple[bool, bool]]) -> Agreement:
    """Agreement over (judge_passed, human_passed) pairs."""
    both_pass = both_fail = judge_only = human_only = 0
    for judge, human in pairs:
        if judge and human:
            both_pass += 1
        elif not judge and not human:
            both_fail += 1
        elif judge:
            judge_only += 1
        else:
            human_only += 1
    n = both_pass + both_fail + judge_only + human_only
    if n == 0:
        return Agreement(0, 0, None, None, 0, 0, 0, 0)
    observed = (both_pass + both_fail) / n
    judge_rate = (both_pass + judge_only) / n
    human_rate = (both_pass + human_only) / n
    chance = judge_rate * human_rate + (1 - judge_rate) * (1 - human_rate)
    kappa = None if chance >= 1.0 else (observed - chance) / (1 - chance)
    return Agreement(
        n, both_pass + both_fail, observed, kappa, both_pass, both_fail, judge_only, human_only
    )

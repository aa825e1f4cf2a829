"""Agreement of an LLM judge: with people's labels, and with itself on the same transcript."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from eval_pipeline.grading._statistics import judge_self_agreement

if TYPE_CHECKING:
    from eval_pipeline.agents import AgentRun
    from eval_pipeline.grading._grader import Grade, Grader
    from eval_pipeline.grading._reference import ReferenceResult
    from eval_pipeline.suite import Case


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


# --- the judge against itself (`--rejudge-samples j`) --------------------------------------


async def with_judge_samples(
    case: Case,
    runs: Sequence[AgentRun],
    reference: ReferenceResult | None,
    grades: Sequence[Grade],
    resamplers: Sequence[Grader],
) -> list[Grade]:
    """`grades` of `runs`, each run with judged checks given its j verdicts (`judge_samples`:
    its own, then one per resampler, a grader whose judge answers as an independent sample).

    Only runs a judge decided are judged again: a verdict no judge touched cannot flip on one.
    """
    judged = [(run, grade) for run, grade in zip(runs, grades, strict=True) if grade.judge]
    if not judged or not resamplers:
        return list(grades)
    again = await asyncio.gather(
        *(grader.grade_case(case, [run for run, _ in judged], reference) for grader in resamplers)
    )
    samples = {
        grade.attempt: [grade.passed, *(resampled[i].passed for resampled in again)]
        for i, (_, grade) in enumerate(judged)
    }
    return [
        replace(grade, judge_samples=samples[grade.attempt]) if grade.attempt in samples else grade
        for grade in grades
    ]


@dataclass(frozen=True)
class JudgeNoise:
    """Where one test's noise comes from, for one model: the judge or the agent.

    Args:
        judge_self_agreement: mean over its re-judged runs of `judge_self_agreement` (1.0:
            the judge always says the same of the same transcript).
        agent_pass_at_1: share of its attempts that passed (the agent's flakiness shows as a
            value strictly between 0 and 1 over several attempts).
        flips_on_judge: some run's verdict changed between re-judgings of the same
            transcript: the test's verdict can flip on the judge alone.
    """

    name: str
    model: str
    attempts: int
    judged_runs: int
    samples: int
    judge_self_agreement: float
    agent_pass_at_1: float
    flips_on_judge: bool

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


def judge_noise(runs: Iterable[tuple[str, str, bool, Sequence[bool] | None]]) -> list[JudgeNoise]:
    """Per (test, model), in first-seen order, from `(name, model, passed, judge_samples)` of
    each graded run; tests with no re-judged run are left out."""
    by_test: dict[tuple[str, str], list[tuple[bool, Sequence[bool] | None]]] = {}
    for name, model, passed, samples in runs:
        by_test.setdefault((name, model), []).append((passed, samples))
    found = []
    for (name, model), attempts in by_test.items():
        sampled = [list(samples) for _, samples in attempts if samples]
        if not sampled:
            continue
        agreements = [judge_self_agreement(samples) for samples in sampled]
        found.append(
            JudgeNoise(
                name=name,
                model=model,
                attempts=len(attempts),
                judged_runs=len(sampled),
                samples=max(len(samples) for samples in sampled),
                judge_self_agreement=sum(agreements) / len(agreements),
                agent_pass_at_1=sum(passed for passed, _ in attempts) / len(attempts),
                flips_on_judge=any(agreement < 1.0 for agreement in agreements),
            )
        )
    return found

"""Checks on what the agent said: LLM-judged evaluators per run, and consistency across a case's runs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import combinations

from eval_pipeline.agents import relabel
from eval_pipeline.grading._judges import Judge
from eval_pipeline.grading._tool_calls import JudgeDecision
from eval_pipeline.grading._verdict import CheckResult, GradeStatus
from eval_pipeline.suite import Consistency, Evaluator, Message

NO_JUDGE = "no judge model configured: set test.judge_model in eval_config.yaml"


async def check_evaluators(
    evaluators: Sequence[Evaluator],
    conversation: Sequence[Message],
    reply: str,
    judge: Judge | None,
) -> CheckResult:
    """Ask the judge about each evaluator's criterion; every one must pass."""
    if judge is None:
        return CheckResult("evaluators", GradeStatus.ERROR, NO_JUDGE)

    async def ask(evaluator: Evaluator) -> JudgeDecision:
        with relabel(f"evaluator:{evaluator.name}"):
            return await judge.evaluate_reply(conversation, reply, evaluator.criteria)

    decisions = await asyncio.gather(*(ask(e) for e in evaluators))
    verdicts = [
        {"evaluator": e.name, "criteria": e.criteria, **_verdict(d)}
        for e, d in zip(evaluators, decisions, strict=True)
    ]
    failed = [v for v in verdicts if v["passed"] is False]
    undecided = [v for v in verdicts if v["passed"] is None]
    details = {"evaluators": verdicts}
    if failed:
        message = "; ".join(
            f"evaluator {v['evaluator']!r} failed: {v['reasoning']}" for v in failed
        )
        return CheckResult("evaluators", GradeStatus.FAILED, message, details)
    if undecided:
        message = "; ".join(f"evaluator {v['evaluator']!r}: {v['error']}" for v in undecided)
        retry = any(d.retry for d in decisions)
        return CheckResult("evaluators", GradeStatus.ERROR, message, details, retry=retry)
    names = ", ".join(e.name for e in evaluators)
    return CheckResult("evaluators", GradeStatus.PASSED, f"evaluators passed: {names}", details)


def _verdict(decision: JudgeDecision) -> dict[str, object]:
    """A decision as an evaluator's entry keeps it: whether it is retried is the check's."""
    return {"passed": decision.passed, "reasoning": decision.reasoning, "error": decision.error}


async def check_consistency(
    consistency: Consistency,
    task: str,
    replies: Sequence[tuple[int, str]],
    judge: Judge | None,
) -> CheckResult:
    """Judge every pair of replies; accuracy = consistent pairs / pairs (oxy's semantics).

    Args:
        consistency: the case's settings (custom prompt, the accuracy it must reach).
        task: the question, shown to the judge as `{{ task_description }}`.
        replies: (attempt, final reply) for each completed run of the case.
        judge: the judge model; None makes the check an error.

    Returns:
        The check, with every pair's verdict and reasoning, each reply's score and the
        most consistent reply in `details`.
    """
    if judge is None:
        return CheckResult("consistency", GradeStatus.ERROR, NO_JUDGE)
    if len(replies) < 2:
        return CheckResult(
            "consistency",
            GradeStatus.ERROR,
            f"consistency needs at least 2 completed runs, got {len(replies)}",
        )
    pairs = list(combinations(range(len(replies)), 2))

    async def compare(i: int, j: int) -> JudgeDecision:
        with relabel(f"consistency:{replies[i][0]}-{replies[j][0]}", attempt=0):
            return await judge.compare_replies(
                task, replies[i][1], replies[j][1], consistency.prompt
            )

    decisions = await asyncio.gather(*(compare(i, j) for i, j in pairs))
    scores = [0] * len(replies)
    judged = []
    for (i, j), decision in zip(pairs, decisions, strict=True):
        if decision.passed:
            scores[i] += 1
            scores[j] += 1
        judged.append(
            {
                "attempts": [replies[i][0], replies[j][0]],
                "consistent": decision.passed,
                "reasoning": decision.reasoning,
                "error": decision.error,
            }
        )
    best = max(range(len(replies)), key=lambda i: (scores[i], -i))
    consistent = sum(1 for d in decisions if d.passed)
    accuracy = consistent / len(pairs)
    details = {
        "accuracy": accuracy,
        "consistent_pairs": consistent,
        "pairs": judged,
        "scores": {str(replies[i][0]): scores[i] for i in range(len(replies))},
        "most_consistent_attempt": replies[best][0],
        "most_consistent_reply": replies[best][1],
        "min_accuracy": consistency.min_accuracy,
    }
    undecided = [d for d in decisions if d.passed is None]
    # An outage is an error only while the undecided pairs could still lift the accuracy to
    # the bar; when even their all agreeing would fall short, the failure is already known.
    best_case = (consistent + len(undecided)) / len(pairs)
    if undecided and best_case + 1e-12 >= consistency.min_accuracy:
        return CheckResult(
            "consistency",
            GradeStatus.ERROR,
            f"{len(undecided)} of {len(pairs)} pair(s) not judged: {undecided[0].error}",
            details,
            retry=any(d.retry for d in undecided),
        )
    message = f"consistency {accuracy:.0%} ({consistent}/{len(pairs)} pairs agree)"
    if undecided:
        message += f", {len(undecided)} pair(s) not judged"
    if accuracy + 1e-12 < consistency.min_accuracy:
        return CheckResult(
            "consistency",
            GradeStatus.FAILED,
            f"{message}, below {consistency.min_accuracy:.0%}",
            details,
        )
    return CheckResult("consistency", GradeStatus.PASSED, message, details)

"""`judge_noise`: per test, the judge's self-agreement beside the agent's pass@1 (by hand)."""

from __future__ import annotations

import pytest

from eval_pipeline.grading import judge_noise


def test_judge_noise_separates_the_judge_from_the_agent():
    runs = [
        # judge steady, agent flaky: 2 of 4 attempts pass
        ("flaky_agent", "m", True, [True, True, True]),
        ("flaky_agent", "m", False, [False, False, False]),
        ("flaky_agent", "m", True, [True, True, True]),
        ("flaky_agent", "m", False, [False, False, False]),
        # one transcript judged pass, fail, pass: 2/3 agree with the majority
        ("shaky_judge", "m", True, [True, False, True]),
        ("shaky_judge", "m", True, [True, True, True]),
        # no judged check: left out
        ("data_only", "m", True, None),
    ]
    found = {n.name: n for n in judge_noise(runs)}
    assert set(found) == {"flaky_agent", "shaky_judge"}
    agent, judge = found["flaky_agent"], found["shaky_judge"]
    assert (agent.judge_self_agreement, agent.agent_pass_at_1, agent.flips_on_judge) == (
        1.0,
        0.5,
        False,
    )
    assert judge.judge_self_agreement == pytest.approx((2 / 3 + 1) / 2)
    assert (judge.agent_pass_at_1, judge.flips_on_judge, judge.judged_runs) == (1.0, True, 2)

"""Many runs at once: concurrency, faults that cost one run and not the batch, the journal,
and which runs a materialization makes again or reuses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.agents import AgentRun, RetryPolicy, RunStatus, execute_run, execute_runs
from eval_pipeline.sandbox import WarehouseUnavailable
from eval_pipeline.suite import Suite, load_agent_context, load_suite
from eval_pipeline_tests.agents.servers import (
    FAST_RETRY,
    ScriptedServer,
    answer,
    error,
    execute_sql,
    hang,
    not_json,
    rate_limited,
    reset,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import (
    by_prompt,
    open_factory,
    prompt_of,
    request_for,
    requests_for,
    write_suite,
)

MODEL = "openai:gpt-4.1"


def make_suite(
    tmp_path: Path, server: ScriptedServer, cases: dict[str, str], **provider: Any
) -> Suite:
    entry = {"provider": "openai", "base_url": server.base_url, "timeout_s": 5, **provider}
    return load_suite(write_suite(tmp_path / "suite", cases=cases, providers=[entry]))


def questions(n: int) -> dict[str, str]:
    return {f"q{i:02d}": f"Question {i}?" for i in range(n)}


def run_batch(
    suite: Suite,
    *,
    concurrency: int,
    policy: RetryPolicy = FAST_RETRY,
    timeout_s: float | None = 900.0,
    finished: list[str] | None = None,
) -> tuple[list[AgentRun], list[str]]:
    """Every case once through `execute_runs`: the runs and the order they finished in
    (appended to `finished` as they end, when given, for a server script that waits on them)."""
    finished = [] if finished is None else finished

    async def go() -> list[AgentRun]:
        async with open_factory(suite, policy=policy, concurrency=concurrency) as factory:
            requests = requests_for(suite, MODEL, context=factory.context)
            return await execute_runs(
                requests,
                factory.agent,
                concurrency=concurrency,
                on_finished=lambda run: finished.append(run.case_name),
                timeout_s=timeout_s,
            )

    return asyncio.run(go()), finished


def overlapping(run: AgentRun, others: Sequence[AgentRun]) -> list[AgentRun]:
    """The runs of `others` that were in progress at some instant while `run` was."""
    start, end = datetime.fromisoformat(run.started_at), datetime.fromisoformat(run.finished_at)
    return [
        other
        for other in others
        if datetime.fromisoformat(other.started_at) < end
        and datetime.fromisoformat(other.finished_at) > start
    ]


def most_in_flight(runs: Sequence[AgentRun]) -> int:
    """The most runs that were in progress at one instant, from their recorded start and end."""
    events = [(datetime.fromisoformat(r.started_at), 1) for r in runs]
    events += [(datetime.fromisoformat(r.finished_at), -1) for r in runs]
    in_flight = most = 0
    for _, change in sorted(events):  # at equal times an end (-1) sorts before a start
        in_flight += change
        most = max(most, in_flight)
    return most


def by_name(runs: Sequence[AgentRun]) -> dict[str, AgentRun]:
    return {run.case_name: run for run in runs}


# ---- concurrency ------------------------------------------------------------------------------


def test_a_slow_run_does_not_hold_up_the_others(tmp_path, openai_server):
    cases = {"a_slow": "Slow question?", **questions(15)}
    suite = make_suite(tmp_path, openai_server, cases, timeout_s=90)  # past the wait below
    finished: list[str] = []
    script = by_prompt(
        {"Slow question?": [tool_calls(execute_sql("SELECT 1")), answer("Finally.")]}
    )

    def slow_until_the_others_finish(request, index):
        # The slow question's first reply waits for the 15 others to finish, which a runner
        # that holds them up behind it never lets happen (it fails at the deadline). A fixed
        # 0.8 s delay was shorter than the others took on a loaded machine.
        first_turn = not any(m.get("role") == "assistant" for m in request.messages)
        if prompt_of(request) == "Slow question?" and first_turn:
            deadline = time.monotonic() + 60
            while len(finished) < 15 and time.monotonic() < deadline:
                time.sleep(0.01)
        return script(request, index)

    openai_server.set_script(slow_until_the_others_finish)

    runs, finished = run_batch(suite, concurrency=4, finished=finished)

    assert all(run.status is RunStatus.COMPLETED for run in runs)
    # Started first, finished last: the 15 others went past it on the 3 other slots...
    assert finished[-1] == "a_slow" and sorted(finished[:-1]) == list(questions(15))
    assert [run.case_name for run in runs] == list(cases)  # returned in request order
    # ...all of them while it was in progress: none waited for it, it waited for none.
    slow, others = runs[0], runs[1:]
    assert len(overlapping(slow, others)) == 15


@pytest.mark.parametrize("concurrency", [3, 20])
def test_the_provider_gets_as_many_requests_at_once_as_the_concurrency(
    tmp_path, openai_server, concurrency
):
    suite = make_suite(tmp_path, openai_server, questions(2 * concurrency))
    openai_server.set_script(by_prompt({}))
    openai_server.latency_s = 0.15  # per completion: long enough for every run to overlap
    runs, _ = run_batch(suite, concurrency=concurrency)

    assert all(run.status is RunStatus.COMPLETED for run in runs)
    # Never more than `concurrency` runs, and that many at once.
    assert most_in_flight(runs) == concurrency
    # The provider saw them overlap (on a loaded machine a few may be between two completions
    # at the peak, so the bound below is loose on purpose) and never more than the bound.
    assert concurrency // 2 < openai_server.peak_in_flight <= concurrency


# ---- faults -----------------------------------------------------------------------------------


def test_each_fault_costs_only_its_own_run(tmp_path, openai_server):
    faults = {
        "rate_limited": "Rate limited?",
        "flaky": "Flaky?",
        "down": "Down?",
        "hangs": "Hangs?",
        "resets": "Resets?",
        "garbage": "Garbage?",
    }
    suite = make_suite(tmp_path, openai_server, {**faults, **questions(6)}, timeout_s=0.25)
    routine = [tool_calls(execute_sql("SELECT 1")), answer("Fine.")]
    openai_server.set_script(
        by_prompt(
            {
                "Rate limited?": [rate_limited(retry_after=0.25), *routine],
                "Flaky?": [error(500, "overloaded"), *routine],
                "Down?": [error(500, "overloaded")] * 3,
                "Hangs?": [hang(2)] * 3,
                "Resets?": [reset()] * 3,
                "Garbage?": [not_json()],
            }
        )
    )
    # Backoff in milliseconds, but a Retry-After of up to 1 s is honoured as asked.
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=1.0)
    runs, finished = run_batch(suite, concurrency=4, policy=policy)

    runs_by_name = by_name(runs)
    assert sorted(finished) == sorted(runs_by_name)  # every run was reported as it ended
    for name in ["rate_limited", "flaky", *questions(6)]:
        assert runs_by_name[name].status is RunStatus.COMPLETED, runs_by_name[name].error
    assert runs_by_name["rate_limited"].duration_ms >= 250  # waited as Retry-After asked
    errors = {name: runs_by_name[name].error for name in ["down", "hangs", "resets", "garbage"]}
    assert all(runs_by_name[name].status is RunStatus.ERROR for name in errors)
    assert "the endpoint failed (HTTP 500)" in errors["down"]
    assert "after 3 attempts: overloaded" in errors["down"]
    assert "no response within 0.25 s" in errors["hangs"] and "after 3 attempts" in errors["hangs"]
    assert "the connection failed before a response" in errors["resets"]
    assert "after 3 attempts" in errors["resets"]
    assert "the body is not JSON (it starts with '<html>" in errors["garbage"]
    assert "attempt" not in errors["garbage"]  # a broken reply is not retried
    for text in errors.values():
        assert text.startswith(f"{MODEL}: ")
    requests_per_prompt = [prompt_of(r) for r in openai_server.requests]
    assert requests_per_prompt.count("Rate limited?") == 3  # 429, then the two turns


def test_a_run_past_the_run_timeout_becomes_an_error(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, {"stuck": "Stuck?", **questions(3)})
    openai_server.set_script(by_prompt({"Stuck?": [answer("Too late.", delay_s=30)]}))

    # The limit holds for every run: the three others (two completions and a query each) must
    # finish within it, and the stuck one must reach the server. On a loaded 2-core machine
    # they took up to 0.34 s, so a 0.3 s limit failed this test 2 times in 30.
    runs, finished = run_batch(suite, concurrency=4, timeout_s=2.0)

    stuck = by_name(runs)["stuck"]
    assert stuck.status is RunStatus.ERROR
    assert stuck.error.startswith("the run did not finish within 2 s (limits.run_timeout_s")
    # Given up at the limit, not waited for: the server still holds the stuck answer.
    assert finished[-1] == "stuck" and openai_server.in_flight == 1
    assert [r.status for r in runs if r.case_name != "stuck"] == [RunStatus.COMPLETED] * 3


def test_a_warehouse_gone_mid_run_becomes_an_error_run_naming_it(tmp_path):
    # Not an `AgentError`, yet the run is an `error` run with the sandbox's message, as for a
    # provider that fails, and not an internal error of the runner.
    suite = load_suite(write_suite(tmp_path / "suite", cases={"q": "Question?"}))
    message = "database 'finance' (postgres): lost the connection: server closed it"

    class LosesTheServer:
        async def run(self, case, *, attempt, run):
            raise WarehouseUnavailable(message)

    context = load_agent_context(suite.config)
    request = request_for(suite.cases[0], MODEL, context=context)
    run = asyncio.run(execute_run(request, LosesTheServer()))
    assert run.status is RunStatus.ERROR
    assert run.error == message

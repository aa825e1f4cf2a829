"""Many runs at once: concurrency, faults that cost one run and not the batch, the journal,
and which runs a materialization makes again or reuses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.agents._retry import RetryPolicy
from eval_pipeline.agents._runner import execute_runs
from eval_pipeline.agents._types import AgentRun, ChatMessage, RunStatus
from eval_pipeline.pipeline import PartitionRuns, run_partition
from eval_pipeline.store import StoreLayout, journal_files, read_journals, read_latest
from eval_pipeline.suite import Suite, load_suite
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
    DAY,
    by_prompt,
    open_factory,
    prompt_of,
    requests_for,
    write_case,
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
) -> tuple[list[AgentRun], list[str], float]:
    """Every case once through `execute_runs`: the runs, the order they finished in, wall time."""
    finished: list[str] = []

    async def go() -> tuple[list[AgentRun], float]:
        async with open_factory(suite, policy=policy, concurrency=concurrency) as factory:
            # The clock starts once the warehouse is open and the client has connected, so
            # the wall time measures the runs, not the process's start-up.
            factory.agent(MODEL)
            warm_up = [ChatMessage("user", "warm-up")]
            await factory.chat_model(MODEL).complete(warm_up, tools=[], max_tokens=1)
            requests = requests_for(suite, MODEL, context=factory.context)
            started = time.perf_counter()
            runs = await execute_runs(
                requests,
                factory.agent,
                concurrency=concurrency,
                on_finished=lambda run: finished.append(run.case_name),
                timeout_s=timeout_s,
            )
            return runs, time.perf_counter() - started

    runs, wall = asyncio.run(go())
    return runs, finished, wall


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
    suite = make_suite(tmp_path, openai_server, cases)
    slow = [tool_calls(execute_sql("SELECT 1"), delay_s=0.8), answer("Finally.")]
    openai_server.set_script(by_prompt({"Slow question?": slow}))

    runs, finished, wall = run_batch(suite, concurrency=4)

    assert all(run.status is RunStatus.COMPLETED for run in runs)
    # Started first, finished last: the 15 others went past it on the 3 other slots...
    assert finished[-1] == "a_slow" and sorted(finished[:-1]) == list(questions(15))
    assert [run.case_name for run in runs] == list(cases)  # returned in request order
    # ...and the batch took no longer than the slow run itself.
    assert wall < by_name(runs)["a_slow"].duration_ms / 1000 + 0.3, wall


@pytest.mark.parametrize("concurrency", [3, 20])
def test_the_provider_gets_as_many_requests_at_once_as_the_concurrency(
    tmp_path, openai_server, concurrency
):
    suite = make_suite(tmp_path, openai_server, questions(2 * concurrency))
    openai_server.set_script(by_prompt({}))
    openai_server.latency_s = 0.15  # per completion: long enough for every run to overlap
    runs, _, _ = run_batch(suite, concurrency=concurrency)

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
    runs, finished, _ = run_batch(suite, concurrency=4, policy=policy)

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
    openai_server.set_script(by_prompt({"Stuck?": [answer("Too late.", delay_s=3)]}))

    runs, finished, wall = run_batch(suite, concurrency=4, timeout_s=0.3)

    stuck = by_name(runs)["stuck"]
    assert stuck.status is RunStatus.ERROR
    assert stuck.error.startswith("the run did not finish within 0.3 s (limits.run_timeout_s")
    assert finished[-1] == "stuck" and wall < 1.5
    assert [r.status for r in runs if r.case_name != "stuck"] == [RunStatus.COMPLETED] * 3


# ---- run_partition: journal and reuse ---------------------------------------------------------


def materialize(
    suite: Suite,
    *,
    on_finished: Callable[[AgentRun], None] | None = None,
    **options: Any,
) -> PartitionRuns:
    """One materialization of the (MODEL, DAY) partition, as the Dagster asset makes it."""

    async def go() -> PartitionRuns:
        async with open_factory(suite) as factory:
            return await run_partition(
                suite,
                MODEL,
                DAY,
                layout=StoreLayout(suite.config.state_path),
                agent_for=factory.agent,
                context_hash=factory.context.hash,
                on_finished=on_finished,
                **options,
            )

    return asyncio.run(go())


def stored_runs(suite: Suite) -> list[dict[str, Any]]:
    return read_latest(
        StoreLayout(suite.config.state_path), "agent_runs", model=MODEL, run_date=DAY
    )


def journaled_keys(suite: Suite) -> list[str]:
    layout = StoreLayout(suite.config.state_path)
    return [r["key"] for r in read_journals(journal_files(layout, "agent_runs", MODEL, DAY))]


def test_each_run_is_journaled_as_it_finishes(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, questions(6))
    openai_server.set_script(by_prompt({}))
    seen: list[tuple[str, list[str], int]] = []

    def on_finished(run: AgentRun) -> None:
        seen.append((run.key, journaled_keys(suite), len(stored_runs(suite))))

    outcome = materialize(suite, on_finished=on_finished, threads=2)

    assert len(seen) == 6 and len(outcome.executed) == 6
    for count, (key, journaled, stored) in enumerate(seen, start=1):
        # Already on disk when reported, before the partition's Parquet file exists.
        assert key in journaled and len(journaled) == count and stored == 0
    assert journaled_keys(suite) == []  # folded into the Parquet file at the end
    assert sorted(r["key"] for r in stored_runs(suite)) == sorted(k for k, _, _ in seen)


class Crash(Exception):
    """Stands for the process dying mid-batch."""


def test_a_crashed_materialization_resumes_from_its_journal(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, questions(5))
    openai_server.set_script(by_prompt({}))

    def crash_after_two(run: AgentRun) -> None:
        if len(journaled_keys(suite)) == 2:
            raise Crash

    with pytest.raises(Crash):
        materialize(suite, on_finished=crash_after_two, threads=1)
    asked_before = {prompt_of(r) for r in openai_server.requests}

    outcome = materialize(suite)

    assert outcome.reused == 2 and len(outcome.executed) == 3
    asked_after = [prompt_of(r) for r in openai_server.requests[len(asked_before) * 2 :]]
    assert asked_before.isdisjoint(asked_after)  # the journaled runs were not made again
    assert len(stored_runs(suite)) == 5


def test_rematerializing_reuses_runs_unless_their_input_changed(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, questions(4))
    openai_server.set_script(by_prompt({}))
    first = materialize(suite)
    assert len(first.executed) == 4

    # Nothing changed: nothing runs, the stored runs stay, marked as reused.
    sent = len(openai_server.requests)
    again = materialize(suite)
    assert again.executed == [] and again.reused == 4
    assert len(openai_server.requests) == sent
    stored = stored_runs(suite)
    assert [r["reused"] for r in stored] == [True] * 4
    assert {r["key"] for r in stored} == {r.key for r in first.runs}

    # One prompt edited: only that case runs again.
    write_case(suite.root, "q02", "Question 2, but for last year?")
    edited = materialize(load_suite(suite.root))
    assert [r.case_name for r in edited.executed] == ["q02"] and edited.reused == 3
    assert prompt_of(openai_server.last) == "Question 2, but for last year?"

    # no_cache: everything runs again.
    fresh = materialize(load_suite(suite.root), no_cache=True)
    assert len(fresh.executed) == 4 and fresh.reused == 0


def test_error_runs_are_retried_next_time_and_completed_ones_reused(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, questions(4))
    openai_server.set_script(by_prompt({"Question 1?": [error(503, "maintenance")] * 3}))
    first = materialize(suite)
    assert [r.status for r in first.runs].count(RunStatus.ERROR) == 1 and first.errors == 1
    assert by_name(first.runs)["q01"].status is RunStatus.ERROR

    openai_server.set_script(by_prompt({}))  # the provider is back
    second = materialize(suite)

    assert [r.case_name for r in second.executed] == ["q01"] and second.reused == 3
    assert second.errors == 0
    assert {r["status"] for r in stored_runs(suite)} == {"completed"}

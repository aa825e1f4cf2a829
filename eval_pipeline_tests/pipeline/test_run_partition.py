"""run_partition, one (model, day) partition's runs: journaled as they finish, resumed after a
crash, reused unless their input changed, retried when they failed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.agents import AgentRun, RunStatus
from eval_pipeline.pipeline import PartitionRuns, run_partition
from eval_pipeline.store import StateFolder, journal_files, read_journals, read_latest
from eval_pipeline.suite import Suite, load_suite
from eval_pipeline_tests.agents.servers import ScriptedServer, error
from eval_pipeline_tests.agents.tiny_suite import (
    DAY,
    by_prompt,
    open_factory,
    prompt_of,
    write_case,
    write_suite,
)

MODEL = "openai:gpt-4.1"


def make_suite(tmp_path: Path, server: ScriptedServer, n: int) -> Suite:
    """A suite of `n` questions (q00, q01, …) on the scripted OpenAI server."""
    cases = {f"q{i:02d}": f"Question {i}?" for i in range(n)}
    entry = {"provider": "openai", "base_url": server.base_url, "timeout_s": 5}
    return load_suite(write_suite(tmp_path / "suite", cases=cases, providers=[entry]))


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
                layout=StateFolder(suite.config.state_path),
                agent_for=factory.agent,
                context_hash=factory.context.hash,
                on_finished=on_finished,
                **options,
            )

    return asyncio.run(go())


def stored_runs(suite: Suite) -> list[dict[str, Any]]:
    return read_latest(
        StateFolder(suite.config.state_path), "agent_runs", model=MODEL, run_date=DAY
    )


def journaled_keys(suite: Suite) -> list[str]:
    layout = StateFolder(suite.config.state_path)
    return [r["key"] for r in read_journals(journal_files(layout, "agent_runs", MODEL, DAY))]


def test_each_run_is_journaled_as_it_finishes(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, 6)
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
    suite = make_suite(tmp_path, openai_server, 5)
    openai_server.set_script(by_prompt({}))

    journaled: list[str] = []

    def crash_after_two(run: AgentRun) -> None:
        journaled.append(run.case_name)
        if len(journaled_keys(suite)) == 2:
            raise Crash

    with pytest.raises(Crash):
        materialize(suite, on_finished=crash_after_two, threads=1)
    sent_before = len(openai_server.requests)

    outcome = materialize(suite)

    assert outcome.reused == 2 and len(outcome.executed) == 3
    asked_after = {prompt_of(r) for r in openai_server.requests[sent_before:]}
    # The journaled runs were not made again (a run stopped in flight by the crash was).
    assert asked_after.isdisjoint(f"Question {int(name[1:])}?" for name in journaled)
    assert len(asked_after) == 3
    assert len(stored_runs(suite)) == 5


def test_rematerializing_reuses_runs_unless_their_input_changed(tmp_path, openai_server):
    suite = make_suite(tmp_path, openai_server, 4)
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
    suite = make_suite(tmp_path, openai_server, 4)
    openai_server.set_script(by_prompt({"Question 1?": [error(503, "maintenance")] * 3}))
    first = materialize(suite)
    assert [r.status for r in first.runs].count(RunStatus.ERROR) == 1 and first.errors == 1
    assert {r.case_name: r for r in first.runs}["q01"].status is RunStatus.ERROR

    openai_server.set_script(by_prompt({}))  # the provider is back
    second = materialize(suite)

    assert [r.case_name for r in second.executed] == ["q01"] and second.reused == 3
    assert second.errors == 0
    assert {r["status"] for r in stored_runs(suite)} == {"completed"}

"""The agent-runs stage of one (model, day) partition: reuse what is done, run the rest, keep every run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from eval_pipeline.agents import (
    Agent,
    AgentFactory,
    AgentRun,
    ProviderPool,
    RunRequest,
    RunStatus,
    answerer_identity,
    execute_runs,
)
from eval_pipeline.grading import runs_needed
from eval_pipeline.pipeline._contexts import store_context
from eval_pipeline.pipeline._progress import publish
from eval_pipeline.pipeline._rerun_causes import RerunCauses
from eval_pipeline.pipeline._rows import (
    is_imported,
    journaled_runs,
    make_storable,
    run_from_row,
    run_to_row,
    tool_call_rows,
)
from eval_pipeline.store import (
    JournaledPartition,
    StateFolder,
    decode_json_rows,
    read_latest,
    stored_form,
)
from eval_pipeline.suite import AgentContext, Case, Suite


@dataclass
class PartitionRuns:
    """What a partition's runs stage did. `runs` is the partition's current set of runs;
    those it made (`executed`) without their conversation, tool calls and queries, which
    the store holds (`_without_transcript`)."""

    runs: list[AgentRun]
    executed: list[AgentRun] = field(default_factory=list)
    reused: int = 0
    carried: int = 0  # runs of unselected cases kept from the previous materialization
    #: why runs the partition held were made again (`RerunCauses`): cause → runs
    reruns: dict[str, int] = field(default_factory=dict)
    #: A line for each endpoint whose rate limit, not its answers, set the pace of the runs.
    paced: tuple[str, ...] = ()

    @property
    def errors(self) -> int:
        return sum(r.status is RunStatus.ERROR for r in self.runs)


async def run_agents(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StateFolder,
    context: AgentContext,
    select: Sequence[str] | None = None,
    no_cache: bool = False,
    recording: bool = False,
    k: int | None = None,
    attempts: Mapping[str, int] | None = None,
    threads: int | None = None,
) -> PartitionRuns:
    """The agent-runs stage of one partition, with its own connections (see `run_partition`)."""
    concurrency = threads or suite.config.test.threads
    store_context(layout, context)  # before a run refers to it
    async with ProviderPool(suite.config, concurrency=concurrency) as pool:
        factory = AgentFactory(suite.config, pool, context=context, recording=recording)
        try:
            outcome = await run_partition(
                suite,
                model,
                run_date,
                layout=layout,
                agent_for=factory.agent,
                context_hash=context.hash,
                context=context,
                select=select,
                no_cache=no_cache,
                k=k,
                attempts=attempts,
                threads=concurrency,
                on_finished=publish,
            )
            return replace(outcome, paced=tuple(pool.paced()))
        finally:
            factory.close()


async def run_partition(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StateFolder,
    agent_for: Callable[[str], Agent],
    context_hash: str,
    context: AgentContext | None = None,
    select: Sequence[str] | None = None,
    no_cache: bool = False,
    k: int | None = None,
    attempts: Mapping[str, int] | None = None,
    threads: int | None = None,
    on_finished: Callable[[AgentRun], None] | None = None,
) -> PartitionRuns:
    """Bring one partition's runs up to date and persist them.

    A run whose key (case, its input, model, context, attempt, day) matches a completed stored
    run made by the same answerer (`answerer_identity`: the endpoint, every request setting
    and the agent) is reused; the others are made, `threads` at a time, each journaled the moment it
    finishes, so a crash loses only the runs in flight. With a selection, only the selected
    cases are brought up to date and the partition keeps the other cases' runs.

    Args:
        suite: the loaded suite.
        model: the partition's model id.
        run_date: the partition's day.
        layout: the store.
        agent_for: the agent answering for a model id.
        context_hash: the agent context's hash (part of every run's key).
        context: the agent context itself, to name the files that changed when its hash
            did (`RerunCauses`); without it, a change is said without names.
        select: test names, file stems or folders; None for all.
        no_cache: make every run afresh, reusing nothing.
        k: attempts per case (default: the config's `test.k`).
        attempts: test name → attempts, where an attempt budget gives a test more than `k`.
        threads: runs in flight (default: the config's `test.threads`).
        on_finished: told of each run as it finishes (progress display).
    """
    selected = suite.select(select)
    previous = _current_runs(layout, model, run_date)
    with JournaledPartition(layout, "agent_runs", model, run_date) as partition:
        journaled = journaled_runs(partition.journaled())
        reusable = {} if no_cache else _reusable([*previous, *journaled])

        answerer = answerer_identity(suite.config, model)
        requests = plan_requests(
            selected,
            model,
            run_date,
            context_hash,
            k=k or suite.config.test.k,
            answerer=answerer,
            attempts=attempts,
        )
        causes = RerunCauses(layout, context, no_cache=no_cache)
        before = {(run.case_name, run.attempt): run for run in previous}
        reused, to_run = [], []
        for request in requests:
            stored = reusable.get(request.key)
            # A run stored before answerers were kept (None) was made by the model as it was then.
            if stored is not None and stored.answerer in (None, answerer):
                reused.append(stored)
            else:
                to_run.append(request)
                causes.count(request, before.get((request.case.name, request.attempt)))

        executed: list[AgentRun] = []
        database = _database_names(suite)
        # Each run made, as the partition's file will hold it (its JSON as text), from the
        # moment it is journaled: what is kept of the run itself is without its transcript.
        made: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        if to_run:
            with partition.journal() as journal:

                def finished(run: AgentRun) -> None:
                    storable = make_storable(run)
                    journal.append(storable.to_dict())
                    made[run.key] = (
                        stored_form(
                            "agent_runs",
                            run_to_row(
                                storable, reused=False, database=database.get(run.case_name)
                            ),
                        ),
                        [stored_form("tool_calls", row) for row in tool_call_rows(storable)],
                    )
                    if on_finished is not None:
                        on_finished(run)

                executed = await execute_runs(
                    to_run,
                    agent_for,
                    concurrency=threads or suite.config.test.threads,
                    on_finished=finished,
                    timeout_s=suite.config.limits.run_timeout_s,
                    kept=_without_transcript,
                )

        order = {(r.case.name, r.attempt): i for i, r in enumerate(requests)}
        current = sorted([*reused, *executed], key=lambda run: order[(run.case_name, run.attempt)])
        selected_names = {case.name for case in selected}
        suite_names = {case.name for case in suite.cases}
        with partition.updating():
            # Read again: another evaluation of this partition (another selection of the day)
            # may have written since we started. Its runs of the tests we did not select are kept.
            carried = [
                run
                for run in _current_runs(layout, model, run_date)
                if run.case_name not in selected_names and run.case_name in suite_names
            ]
            runs = [*current, *carried]

            def stored(run: AgentRun) -> tuple[dict[str, Any], list[dict[str, Any]]]:
                if run.key in made:
                    return made[run.key]
                row = run_to_row(run, reused=True, database=database.get(run.case_name))
                return row, tool_call_rows(run)

            partition.write("agent_runs", [stored(run)[0] for run in runs])
            partition.write("tool_calls", [row for run in runs for row in stored(run)[1]])
    return PartitionRuns(
        runs=runs,
        executed=executed,
        reused=len(reused),
        carried=len(carried),
        reruns=dict(causes.counts),
    )


def _without_transcript(run: AgentRun) -> AgentRun:
    """What a partition keeps of a run it made once the run is journaled and its row made:
    all but the conversation, tool calls and queries (the store holds them)."""
    return replace(run, messages=[], tool_calls=[], queries=[])


def _reusable(runs: Sequence[AgentRun]) -> dict[str, AgentRun]:
    """Completed runs by key; a later entry (a newer journal line) wins."""
    return {run.key: run for run in runs if run.status is RunStatus.COMPLETED}


def attempts_for(case: Case, k: int, planned: Mapping[str, int] | None = None) -> int:
    """Attempts of a case: its own `k`, else the run's; a check may need more (consistency
    its `n`); an attempt budget's allocation (`planned`: test name → attempts) may ask for more."""
    attempts = max(case.k or k, runs_needed(case))
    if planned:
        attempts = max(attempts, planned.get(case.name, 0))
    return attempts


def plan_requests(
    cases: Sequence[Case],
    model: str,
    run_date: date,
    context_hash: str,
    *,
    k: int,
    answerer: str = "",
    attempts: Mapping[str, int] | None = None,
) -> list[RunRequest]:
    """Every run of `cases` for the model and day: each case's attempts (`attempts_for`)."""
    return [
        RunRequest(case, model, attempt, run_date, context_hash, answerer)
        for case in cases
        for attempt in range(attempts_for(case, k, attempts))
    ]


def _current_runs(layout: StateFolder, model: str, run_date: date) -> list[AgentRun]:
    """The partition's runs of ours. Runs imported from a results file are history: an
    evaluation of the day neither reuses nor carries them (they stay in `agent_runs_history`)."""
    rows = read_latest(layout, "agent_runs", model=model, run_date=run_date)
    rows = [row for row in rows if not is_imported(row["key"])]
    return [run_from_row(row) for row in decode_json_rows("agent_runs", rows)]


def _database_names(suite: Suite) -> dict[str, str]:
    """Each test's database (the one its `database:` names, else the first configured)."""
    names = {}
    for case in suite.cases:
        database = suite.config.database(case.database)
        if database is not None:
            names[case.name] = database.name
    return names

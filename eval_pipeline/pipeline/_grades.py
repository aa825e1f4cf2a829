"""The grading stage of one (model, day) partition: its stored runs graded against the day's references."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import date

from eval_pipeline.agents import (
    AgentFactory,
    CachedChatModel,
    ChatModel,
    ProviderPool,
    recording_name,
)
from eval_pipeline.grading import Grade, Grader, GradingRules, with_judge_samples
from eval_pipeline.pipeline._progress import publish
from eval_pipeline.pipeline._references import load_references
from eval_pipeline.pipeline._rows import is_imported, run_from_row
from eval_pipeline.pipeline._variants import VariantSandboxes
from eval_pipeline.store import (
    FileCompletionCache,
    StateFolder,
    decode_json_rows,
    latest_table,
    read_latest,
    stored_form,
    updating_partition,
    write_rows,
)
from eval_pipeline.suite import AgentContext, Suite

GRADING_CONCURRENCY = 8

#: Cases whose grading is under way at once (`GRADING_CONCURRENCY` of them asking a judge):
#: the memory of a partition's grading is that of this many cases, whatever its size.
GRADED_AT_ONCE = 256


async def grade_runs(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StateFolder,
    context: AgentContext,
    rejudge: bool = False,
    rejudge_samples: int = 1,
    on_paced: Callable[[str], None] = lambda _line: None,
) -> list[Grade]:
    """The grading stage of one partition: stored runs in, grades out, no agent call.
    `rejudge` asks the judge and extraction model again instead of using cached answers;
    `rejudge_samples` j ≥ 2 judges each run with judged checks j times in all (its grade is
    the first; `Grade.judge_samples`), to tell judge noise from agent noise. `on_paced` is
    told of each endpoint (the judge's) whose rate limit set the pace."""
    config = suite.config.test
    rules = GradingRules.of(suite.config)
    async with ProviderPool(suite.config, concurrency=8) as pool:
        factory = AgentFactory(suite.config, pool, context=context)
        variants = VariantSandboxes(suite, layout)

        def grader(sample: int) -> Grader:
            judge = judge_model(factory, config.judge_model, layout, rejudge=rejudge, sample=sample)
            return Grader(
                judge_model=judge,
                extraction=rules.extraction,
                tolerance=rules.tolerance,
                variants=variants,
                judge_failed_runs=rules.judge_failed_runs,
            )

        # No judge, nothing to judge again; a recorded judge gives its recorded answer only.
        live_judge = config.judge_model is not None and recording_name(config.judge_model) is None
        resamplers = [grader(sample) for sample in range(1, rejudge_samples)] if live_judge else []
        try:
            grades = await grade_partition(
                suite,
                model,
                run_date,
                layout=layout,
                grader=grader(0),
                resamplers=resamplers,
                rules=rules.parts(),
            )
        finally:
            variants.close()
            factory.close()
        for line in pool.paced():
            on_paced(line)
    for grade in grades:
        publish(grade)
    return grades


def judge_model(
    factory: AgentFactory,
    model_id: str | None,
    layout: StateFolder,
    *,
    rejudge: bool = False,
    sample: int = 0,
) -> ChatModel | None:
    """The judge/extraction model; real ones answer repeated questions from the store's cache
    (unless `rejudge`: then they are asked again, and their new answers cached). `sample` > 0
    is another independent answer to each question, cached apart (`--rejudge-samples`)."""
    if model_id is None:
        return None
    model = factory.chat_model(model_id)
    if recording_name(model_id) is not None:
        return model  # a replay is free and must see every call to keep its turns in order
    return CachedChatModel(model, FileCompletionCache(layout), refresh=rejudge, sample=sample)


async def grade_partition(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StateFolder,
    grader: Grader,
    resamplers: Sequence[Grader] = (),
    rules: Mapping[str, str] | None = None,
) -> list[Grade]:
    """Grade the partition's stored runs (no agent call) and store the grades (an imported
    run keeps the grade it came with); with
    `resamplers` (graders whose judge answers as other samples), each run a judge decided is
    judged again by each and keeps its verdicts (`with_judge_samples`). `rules`: the digests
    of the grading rules the grader applies (`GradingRules.parts`), kept with each grade so a
    verdict that moved with them is told from one that moved with the agent.

    The partition is held from reading its runs to writing their grades, so when two
    evaluations of it finish together the grades written last are of the runs written last.
    """
    with updating_partition(layout, model, run_date):
        # The partition's runs as Arrow: each case's are made Python values when it is
        # graded, and let go once its grades are rows. The transcript is not graded (half of
        # what a run holds): its reply, tool calls and queries are.
        stored = latest_table(
            layout, "agent_runs", model=model, run_date=run_date, leaving_out=("messages",)
        )
        # Imported runs are history another tool graded; they hold no queries to grade again.
        keys = stored.column("key").to_pylist()
        imported = {key for key in keys if is_imported(key)}
        rows_by_case: dict[str, list[int]] = defaultdict(list)
        for index, (key, name) in enumerate(
            zip(keys, stored.column("name").to_pylist(), strict=True)
        ):
            if key not in imported:
                rows_by_case[name].append(index)
        references = load_references(layout, run_date)
        gate = asyncio.Semaphore(GRADING_CONCURRENCY)

        async def grade(case):
            async with gate:
                case_rows = stored.take(rows_by_case.pop(case.name)).to_pylist()
                runs = sorted(
                    (run_from_row(row) for row in decode_json_rows("agent_runs", case_rows)),
                    key=lambda r: r.attempt,
                )
                reference = references.get(case.name)
                grades = await grader.grade_case(case, runs, reference)
                return await with_judge_samples(case, runs, reference, grades, resamplers)

        cases = [c for c in suite.cases if rows_by_case.get(c.name)]
        grades: list[Grade] = []
        rows = []
        # A bounded number of cases at a time: what grading a case holds (its runs, their
        # results, the comparison) is let go before the next ones start.
        for start in range(0, len(cases), GRADED_AT_ONCE):
            chunk = cases[start : start + GRADED_AT_ONCE]
            for case_grades in await asyncio.gather(*(grade(c) for c in chunk)):
                grades += case_grades
                rows += [
                    stored_form("grades", {**g.to_row(), "grading_rules": rules})
                    for g in case_grades
                ]
        if imported:  # their grades stay as they were imported
            graded_there = read_latest(layout, "grades", model=model, run_date=run_date)
            rows += [row for row in graded_there if row["run_key"] in imported]
        write_rows(layout, "grades", rows, model=model, run_date=run_date)
    return grades

"""The grading stage of one (model, day) partition: its stored runs graded against the day's references."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date

from eval_pipeline.grading import Grade, Grader, with_judge_samples
from eval_pipeline.pipeline._records import is_imported, run_from_row
from eval_pipeline.pipeline._references import load_references
from eval_pipeline.store import (
    StoreLayout,
    decode_json_rows,
    read_latest,
    updating_partition,
    write_rows,
)
from eval_pipeline.suite import Suite

GRADING_CONCURRENCY = 8


async def grade_partition(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StoreLayout,
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
        runs_by_case = defaultdict(list)
        rows = read_latest(layout, "agent_runs", model=model, run_date=run_date)
        # Imported runs are history another tool graded; they hold no queries to grade again.
        imported = {row["key"] for row in rows if is_imported(row["key"])}
        for row in decode_json_rows("agent_runs", [r for r in rows if r["key"] not in imported]):
            runs_by_case[row["name"]].append(run_from_row(row))
        references = load_references(layout, run_date)
        gate = asyncio.Semaphore(GRADING_CONCURRENCY)

        async def grade(case):
            async with gate:
                runs = sorted(runs_by_case[case.name], key=lambda r: r.attempt)
                reference = references.get(case.name)
                grades = await grader.grade_case(case, runs, reference)
                return await with_judge_samples(case, runs, reference, grades, resamplers)

        cases = [c for c in suite.cases if runs_by_case.get(c.name)]
        graded = await asyncio.gather(*(grade(c) for c in cases))
        grades = [g for case_grades in graded for g in case_grades]
        records = [{**g.to_record(), "grading_rules": rules} for g in grades]
        if imported:  # their grades stay as they were imported
            stored = read_latest(layout, "grades", model=model, run_date=run_date)
            records += [row for row in stored if row["run_key"] in imported]
        write_rows(layout, "grades", records, model=model, run_date=run_date)
    return grades

"""Re-keying a hand-written recording: replay it by position over the suite, and write into each
line the hash of the request it really answers."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from eval_pipeline.agents import AgentFactory, ProviderPool, RekeyReport, recording_name
from eval_pipeline.grading import Grader
from eval_pipeline.pipeline._grades import grade_partition
from eval_pipeline.pipeline._references import compute_references
from eval_pipeline.pipeline._runs import run_partition
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, load_agent_context


async def rekey_recordings(
    suite: Suite, models: Sequence[str], *, run_date: date | None = None, k: int | None = None
) -> list[RekeyReport]:
    """Run and grade every test with the `replay:` models (and a `replay:` judge), serving
    each line by its position alone, then store in each line the request it answered.

    A person writes a recording's completions; the requests they answer (system prompt,
    tool results from the warehouse, the judge's prompt around a reply) are only known by
    running them, which this does in a throwaway store, never touching the suite's results.

    Args:
        suite: the loaded suite whose recordings are re-keyed.
        models: the `replay:` model ids to run, e.g. ["replay:demo"].
        run_date: the day the throwaway evaluation belongs to (default: today).
        k: attempts per test (default: the suite's, as an evaluation makes them).

    Returns:
        One report per recording that was used (agent or judge).
    """
    day = run_date or date.today()
    config = suite.config
    context = load_agent_context(config)
    judge_id = config.test.judge_model
    with tempfile.TemporaryDirectory(prefix="eval-rekey-") as folder:
        layout = StateFolder(Path(folder))
        compute_references(suite, day, layout=layout)
        async with ProviderPool(config, concurrency=config.test.threads) as pool:
            factory = AgentFactory(config, pool, context=context, rekey=True)
            try:
                judge = None
                if judge_id is not None and recording_name(judge_id) is not None:
                    judge = factory.chat_model(judge_id)
                extraction = config.test.extraction if judge is not None else "last_query"
                grader = Grader(
                    judge_model=judge, extraction=extraction, tolerance=config.test.comparison
                )
                for model in models:
                    await run_partition(
                        suite,
                        model,
                        day,
                        layout=layout,
                        agent_for=factory.agent,
                        context_hash=context.hash,
                        no_cache=True,
                        k=k,
                    )
                    await grade_partition(suite, model, day, layout=layout, grader=grader)
            finally:
                factory.close()
    return [recording.save_keys() for recording in factory.recordings.values()]

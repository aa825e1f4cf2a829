"""One stage's working session: open connections, build agents or judges, run, close."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from eval_pipeline.agents import (
    AgentFactory,
    CachedChatModel,
    ChatModel,
    ProviderPool,
    recording_name,
)
from eval_pipeline.grading import Grade, Grader, GradingRules
from eval_pipeline.pipeline._grades import grade_partition
from eval_pipeline.pipeline._progress import publish
from eval_pipeline.pipeline._runs import PartitionRuns, run_partition
from eval_pipeline.pipeline._variants import VariantSandboxes
from eval_pipeline.store import FileCompletionCache, StoreLayout
from eval_pipeline.suite import AgentContext, Suite


async def run_agents(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StoreLayout,
    context: AgentContext,
    select: Sequence[str] | None = None,
    no_cache: bool = False,
    record: bool = False,
    k: int | None = None,
    threads: int | None = None,
) -> PartitionRuns:
    """The agent-runs stage of one partition, with its own connections (see `run_partition`)."""
    concurrency = threads or suite.config.test.threads
    async with ProviderPool(suite.config, concurrency=concurrency) as pool:
        factory = AgentFactory(suite.config, pool, context=context, record=record)
        try:
            return await run_partition(
                suite,
                model,
                run_date,
                layout=layout,
                agent_for=factory.agent,
                context_hash=context.hash,
                select=select,
                no_cache=no_cache,
                k=k,
                threads=concurrency,
                on_finished=publish,
            )
        finally:
            factory.close()


def judge_model(
    factory: AgentFactory,
    model_id: str | None,
    layout: StoreLayout,
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


async def grade_runs(
    suite: Suite,
    model: str,
    run_date: date,
    *,
    layout: StoreLayout,
    context: AgentContext,
    rejudge: bool = False,
    rejudge_samples: int = 1,
) -> list[Grade]:
    """The grading stage of one partition: stored runs in, grades out, no agent call.
    `rejudge` asks the judge and extraction model again instead of using cached answers;
    `rejudge_samples` j ≥ 2 judges each run with judged checks j times in all (its grade is
    the first; `Grade.judge_samples`), to tell judge noise from agent noise."""
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
    for grade in grades:
        publish(grade)
    return grades

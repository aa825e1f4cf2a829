"""The recommendations of production usage as a command or an asset shows them: ranked, and with the suite's judge model configured, each of the top ones summed up in a paragraph from its conversations (cached like the judge's verdicts)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from datetime import date

from eval_pipeline.agents import AgentError, AgentFactory, ChatMessage, ProviderPool
from eval_pipeline.pipeline._grades import judge_model
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, load_agent_context, printable
from eval_pipeline.usage import (
    Conversation,
    Ranking,
    Recommendation,
    prompts_of,
    rank,
    stored_conversations,
    write_recommendations,
)

__all__ = ["SUMMARIZED", "current_recommendations"]

#: The recommendations the judge sums up (the rest keep the rules' text).
SUMMARIZED = 10
_EXAMPLES = 3
_MAX_TOKENS = 400

_PROMPT = """\
You help the team that maintains the context files of an analytics agent (the rules, the \
semantic definitions and the table docs it reads). Below is one cluster of friction found in \
its production conversations, and some of those conversations.

Kind of friction: {kind}
File to change: {file}
What the rules found: {summary}

Conversations:
{conversations}

Write one paragraph of at most 90 words, in plain text: what the users were trying to do, \
what went wrong, and what is missing, wrong or unclear in {file} that would have prevented it. \
Name tables, columns and definitions where the conversations show them. No preamble."""


def current_recommendations(
    suite: Suite,
    layout: StateFolder,
    *,
    since: date | None = None,
    rejudge: bool = False,
    refresh: bool = True,
) -> Ranking:
    """The recommendations of the days from `since` (`usage.rank`, the signals first brought
    up to date with the suite's tests unless `refresh=False`: a caller just did), stored as
    the `recommendations` table; with `test.judge_model` configured, the first `SUMMARIZED`
    carry the judge's paragraph as their summary (the rules' text where the judge did not
    answer). `rejudge` asks the judge again instead of using its cached answers."""
    prompts = prompts_of(suite.cases) if refresh else None
    ranking = rank(layout, suite.root, prompts, since=since, write=False)
    judge_id = suite.config.test.judge_model
    if judge_id is not None and ranking.recommendations:
        conversations = {c.id: c for c in stored_conversations(layout, since=ranking.since)}
        paragraphs = asyncio.run(
            _summaries(suite, layout, ranking.recommendations[:SUMMARIZED], conversations, rejudge)
        )
        ranked = [
            dataclasses.replace(r, summary=paragraphs[r.id], summarized_by=judge_id)
            if r.id in paragraphs
            else r
            for r in ranking.recommendations
        ]
        ranking = dataclasses.replace(ranking, recommendations=ranked)
    write_recommendations(layout, ranking.recommendations)
    return ranking


async def _summaries(
    suite: Suite,
    layout: StateFolder,
    ranked: Sequence[Recommendation],
    conversations: Mapping[str, Conversation],
    rejudge: bool,
) -> dict[str, str]:
    async with ProviderPool(suite.config, concurrency=4) as pool:
        factory = AgentFactory(suite.config, pool, context=load_agent_context(suite.config))
        try:
            judge = judge_model(factory, suite.config.test.judge_model, layout, rejudge=rejudge)
            assert judge is not None

            async def one(recommendation: Recommendation) -> tuple[str, str | None]:
                prompt = _prompt(recommendation, conversations)
                try:
                    completion = await judge.complete(
                        [ChatMessage("user", prompt)], tools=(), max_tokens=_MAX_TOKENS
                    )
                except AgentError:
                    return recommendation.id, None  # the rules' text stays
                text = " ".join(completion.text.split())
                return recommendation.id, printable(text[:1200]) or None

            answers = await asyncio.gather(*(one(r) for r in ranked))
        finally:
            factory.close()
    return {ident: text for ident, text in answers if text}


def _prompt(recommendation: Recommendation, conversations: Mapping[str, Conversation]) -> str:
    shown = []
    for ident in recommendation.conversations[:_EXAMPLES]:
        conversation = conversations.get(ident)
        if conversation is None:
            continue
        lines = []
        for turn in conversation.turns[:6]:
            lines.append(f"  {turn.role}: {turn.text[:300]}")
            for call in turn.tool_calls:
                what = call.sql or call.name
                lines.append(
                    f"    tool {call.name}: {what[:300]}"
                    + (f" → error: {call.error[:200]}" if call.error else "")
                )
            if turn.feedback:
                lines.append(f"    (the user voted this answer {turn.feedback})")
        shown.append(f"- conversation {ident}:\n" + "\n".join(lines))
    return _PROMPT.format(
        kind=recommendation.kind,
        file=recommendation.file,
        summary=recommendation.summary,
        conversations="\n".join(shown) or "(none kept)",
    )

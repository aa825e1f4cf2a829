"""The recommendations of production usage as a command or an asset shows them: ranked, and with the suite's judge model configured, each of the top ones summed up in a paragraph from its conversations (cached like the judge's verdicts) and, when asked for (`usage.confirm_corrections`), each correction found in a user's words confirmed by the judge first."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Hashable, Mapping
from datetime import date
from typing import TypeVar

from eval_pipeline.agents import AgentError, AgentFactory, ChatMessage, ProviderPool
from eval_pipeline.pipeline._grades import judge_model
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Suite, load_agent_context, printable
from eval_pipeline.usage import (
    Conversation,
    Ranking,
    Recommendation,
    Signal,
    prompts_of,
    rank,
    stored_conversations,
    worded_correction,
    write_recommendations,
)

__all__ = ["SUMMARIZED", "current_recommendations"]

_K = TypeVar("_K", bound=Hashable)

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

_CONFIRM = """\
An analytics agent answered a user's question, and the user wrote again. Decide whether that \
next message says the answer was wrong, incomplete or not what was asked (a correction, or the \
same question asked again because the answer did not serve), or is something else (a new \
question, a follow-up building on a good answer, thanks).

Question: {question}
Answer: {answer}
The user's next message: {follow_up}

Reply with one word: CORRECTION or OTHER."""


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
    judge_id = suite.config.test.judge_model
    confirm = judge_id is not None and suite.config.usage.confirm_corrections
    keep = _confirmed_by_judge(suite, layout, rejudge) if confirm else None
    ranking = rank(layout, suite.root, prompts, since=since, write=False, keep=keep)
    if judge_id is not None and ranking.recommendations:
        conversations = {c.id: c for c in stored_conversations(layout, since=ranking.since)}
        top = ranking.recommendations[:SUMMARIZED]
        said = asyncio.run(
            _ask_judge(
                suite,
                layout,
                {r.id: _prompt(r, conversations) for r in top},
                rejudge,
                max_tokens=_MAX_TOKENS,
            )
        )
        # Where the judge did not answer (or said nothing), the rules' text stays.
        paragraphs = {
            ident: text
            for ident, answer in said.items()
            if (text := printable(" ".join(answer.split())[:1200]))
        }
        ranked = [
            dataclasses.replace(r, summary=paragraphs[r.id], summarized_by=judge_id)
            if r.id in paragraphs
            else r
            for r in ranking.recommendations
        ]
        ranking = dataclasses.replace(ranking, recommendations=ranked)
    write_recommendations(layout, ranking.recommendations)
    return ranking


def _confirmed_by_judge(
    suite: Suite, layout: StateFolder, rejudge: bool
) -> Callable[[list[Signal]], list[Signal]]:
    """The signals less the corrections found in a user's words that the judge says are no
    correction; where it does not answer, or answers something else, the rules' finding
    stands. Its answers are cached like its verdicts."""

    def keep(signals: list[Signal]) -> list[Signal]:
        worded = [s for s in signals if s.kind == "correction"]
        if not worded:
            return signals
        since = min(s.day for s in worded)
        conversations = {c.id: c for c in stored_conversations(layout, since=since)}
        asked = {
            index: (signal, found)
            for index, signal in enumerate(signals)
            if (c := conversations.get(signal.conversation_id)) is not None
            and (found := worded_correction(signal, c)) is not None
        }
        if not asked:
            return signals
        prompts = {
            index: _CONFIRM.format(
                question=signal.question[:600], answer=answer[:600], follow_up=follow_up[:600]
            )
            for index, (signal, (answer, follow_up)) in asked.items()
        }
        said = asyncio.run(_ask_judge(suite, layout, prompts, rejudge, max_tokens=16))
        # The rules' finding stands where the judge did not answer, or said something else.
        return [
            s
            for index, s in enumerate(signals)
            if not (said.get(index) or "").strip().upper().startswith("OTHER")
        ]

    return keep


async def _ask_judge(
    suite: Suite,
    layout: StateFolder,
    prompts: Mapping[_K, str],
    rejudge: bool,
    *,
    max_tokens: int,
) -> dict[_K, str]:
    """The judge's answer to each prompt (asked at most four at a time, cached like its
    verdicts); a prompt it did not answer has none."""
    async with ProviderPool(suite.config, concurrency=4) as pool:
        factory = AgentFactory(suite.config, pool, context=load_agent_context(suite.config))
        try:
            judge = judge_model(factory, suite.config.test.judge_model, layout, rejudge=rejudge)
            assert judge is not None

            async def one(key: _K, prompt: str) -> tuple[_K, str | None]:
                try:
                    completion = await judge.complete(
                        [ChatMessage("user", prompt)], tools=(), max_tokens=max_tokens
                    )
                except AgentError:
                    return key, None
                return key, completion.text

            answers = await asyncio.gather(*(one(k, p) for k, p in prompts.items()))
        finally:
            factory.close()
    return {key: text for key, text in answers if text is not None}


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

"""The text of each agent context, kept once by its hash for the runs that refer to it."""

from __future__ import annotations

from eval_pipeline.store import StateFolder, fetch, write_rows
from eval_pipeline.suite import AgentContext

__all__ = ["store_context"]


def store_context(layout: StateFolder, context: AgentContext) -> None:
    """Keep `context`'s text in `agent_contexts` unless a row of its hash is there already.

    The built-in agent's runs store their system message with a reference to the context
    (`AgentContext.stored_text`): a 2 MB RULES.md stored with each of a thousand runs
    would be 2 GB. Two processes storing the same new context at once write it twice;
    `agent_contexts_latest` keeps one.
    """
    if not context.files:
        return
    _, found = fetch(
        layout,
        "SELECT 1 FROM agent_contexts_history WHERE context_hash = ? LIMIT 1",
        [context.hash],
    )
    if found:
        return
    row = {
        "context_hash": context.hash,
        "files": [f.label for f in context.files],
        "text": context.prompt_text,
    }
    write_rows(layout, "agent_contexts", [row])

"""The two interfaces of whatever answers a test: a ChatModel (one LLM) and an Agent (one run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from eval_pipeline.agents._types import AgentRun, ChatMessage, Completion, ToolSpec
from eval_pipeline.suite._case import Case
from eval_pipeline.suite._config import ModelCosts

__all__ = ["Agent", "ChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """One LLM behind a provider's wire protocol, as the built-in agent loop sees it.

    Attributes:
        model_id: the id the user wrote, ``provider:model_id`` (e.g. ``openai:gpt-4.1``).
        costs: its prices (configured, else the built-in table), None when unknown.
    """

    model_id: str
    costs: ModelCosts | None

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec], max_tokens: int
    ) -> Completion:
        """One completion of the transcript.

        Args:
            messages: the provider-neutral transcript, system prompt first if any.
            tools: the tools the model may call (empty: none offered).
            max_tokens: cap on the tokens generated in this completion.

        Raises:
            ProviderError: the provider failed, after the retry policy gave up.
        """
        ...


@runtime_checkable
class Agent(Protocol):
    """Whatever answers a test case: the built-in agent over an LLM, an HTTP agent, a replay."""

    model_id: str

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        """Run `case` once and fill `run` in place (final text, transcript, tool calls, usage...).

        Args:
            case: the test case; its messages are what the agent is given.
            attempt: the attempt index, as in the run key; sent to HTTP agents as `attempt`.
            run: the record to fill; status, timing and the error field are the caller's.

        Raises:
            AgentError: the run could not finish (its status becomes `error`); `run` is
                then left as it was.
        """
        ...

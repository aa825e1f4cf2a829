"""The two interfaces of whatever answers a test: a ChatModel (one LLM) and an Agent (one run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import httpx

from eval_pipeline.agents._errors import require_not_cut
from eval_pipeline.agents._retry import DEFAULT_RETRY_POLICY, RetryPolicy, send_with_retry
from eval_pipeline.agents._types import AgentRun, ChatMessage, Completion, ToolSpec
from eval_pipeline.agents._wire import BodyReader
from eval_pipeline.suite import Case, ModelCosts

__all__ = ["Agent", "ChatModel", "HttpChatModel"]


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
            max_tokens: cap on the tokens generated in this completion; a `max_tokens`
                configured for the model or its provider in eval_config.yaml wins.

        Raises:
            ProviderError: the provider failed, after the retry policy gave up.
            ReplyTruncated: the limit cut the reply or a tool call's arguments.
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


class HttpChatModel:
    """What every provider's chat model shares: one pooled client, the model id, prices, and
    a completion that is one POST through the retry policy. A provider subclass says where
    (`default_base_url`, `path`), what to send (`request_body`) and how to read (`parse`).

    Args:
        client: the provider's pooled client, carrying its auth headers.
        model: the model name sent on the wire (``gpt-4.1``, ``claude-sonnet-4-5``).
        provider: the provider's configured name, the prefix of `model_id`.
        base_url: the API root; None means the vendor's own.
        costs: prices for cost accounting, None when unknown.
        policy: the retry policy.
        max_tokens: the configured cap on each completion's tokens; it replaces the one the
            caller asks for (agent loop, judge, extraction), so a user who sees a cut reply
            can raise it for every call of the model. None: the caller's.
        settings: the model's configured request fields (temperature, reasoning_effort, ...),
            sent with every completion; the config reader let through only fields of this
            provider's protocol.
    """

    default_provider: ClassVar[str]
    default_base_url: ClassVar[str]
    path: ClassVar[str]

    def __init__(
        self,
        client: httpx.AsyncClient,
        model: str,
        *,
        provider: str | None = None,
        base_url: str | None = None,
        costs: ModelCosts | None = None,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        max_tokens: int | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.settings = dict(settings or {})
        self.model_id = f"{provider or self.default_provider}:{model}"
        self.costs = costs
        self.url = f"{(base_url or self.default_base_url).rstrip('/')}{self.path}"
        self._client = client
        self._policy = policy

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r}, url={self.url!r})"

    def request_body(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec], max_tokens: int
    ) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, reader: BodyReader) -> Completion:
        raise NotImplementedError

    async def complete(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec], max_tokens: int
    ) -> Completion:
        """One completion; see `ChatModel.complete`."""
        limit = self.max_tokens or max_tokens
        response = await send_with_retry(
            self._client,
            "POST",
            self.url,
            endpoint=self.model_id,
            json={**self.request_body(messages, tools=tools, max_tokens=limit), **self.settings},
            policy=self._policy,
        )
        completion = self.parse(BodyReader(response, endpoint=self.model_id))
        return require_not_cut(self.model_id, completion, max_tokens=limit)

"""The connections of one evaluation: a pooled HTTP client per provider and agent, and model lookup."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from types import TracebackType

import httpx

from eval_pipeline.agents._anthropic import AnthropicChatModel, anthropic_headers
from eval_pipeline.agents._chat import ChatModel
from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._http_agent import HttpAgent
from eval_pipeline.agents._model_ids import require_model_id, split_model_id
from eval_pipeline.agents._nao_backend import (
    NaoBackendAgent,
    NaoSession,
    nao_backend_url,
    nao_model,
)
from eval_pipeline.agents._openai import OpenAIChatModel, openai_headers
from eval_pipeline.agents._pacing import Pace
from eval_pipeline.agents._pricing import costs_for
from eval_pipeline.agents._retry import DEFAULT_RETRY_POLICY, RetryPolicy
from eval_pipeline.agents._transport import AiohttpTransport, LimitedClient, ReplyLimits
from eval_pipeline.suite import ProviderConfig, SuiteConfig, to_model_id

__all__ = ["ProviderPool", "split_model_id"]

# Connecting is quick or not at all; a long connect wait only delays the retry that helps.
_CONNECT_TIMEOUT_S = 10.0


@functools.cache
def _tls_context() -> ssl.SSLContext | bool:
    # Loading the CA bundle costs tens of milliseconds per client; one context serves all.
    # `create_ssl_context` (httpx >= 0.28) honours SSL_CERT_FILE / SSL_CERT_DIR like a client.
    create = getattr(httpx, "create_ssl_context", None)
    return create() if create is not None else True


class ProviderPool:
    """One pooled `httpx.AsyncClient` per provider and per external agent, for one evaluation.

    Use it as an async context manager; clients are built on first use, which is also when
    API keys are read from the environment, so a run that uses only OpenAI models does not
    need an Anthropic key. Keys live in the client's headers and nowhere else.

    Args:
        config: the suite configuration (providers, agents, prices).
        concurrency: runs in flight at once; sizes each client's connection pool.
            None means `config.test.threads`.
        policy: the retry policy for every call.
        transport: an httpx transport for every client (tests); None is aiohttp's, which
            also takes proxies from the environment.
        environ: where `{{ env('NAME') }}` reads from; None means `os.environ`.
    """

    def __init__(
        self,
        config: SuiteConfig,
        *,
        concurrency: int | None = None,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.concurrency = max(1, concurrency if concurrency is not None else config.test.threads)
        self.policy = policy
        self._transport = transport
        self._environ = dict(environ) if environ is not None else None
        self._clients: dict[str, LimitedClient] = {}
        self._nao_sessions: dict[str, NaoSession] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"ProviderPool(clients={sorted(self._clients)!r}, concurrency={self.concurrency})"

    async def __aenter__(self) -> ProviderPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every client; the pool cannot be used afterwards."""
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    def chat_model(self, model: str) -> ChatModel:
        """The chat model for ``provider:model_id``.

        Raises:
            UnknownModel: the provider is not configured (the message lists those that are),
                or the id names an external agent (``http:``).
            MissingSecret: the provider's API key reads an environment variable that is unset.
        """
        require_model_id(self.config, model, chat_model=True)
        provider_name, model_id = split_model_id(model)
        provider = self.config.provider(provider_name)
        if provider is None:  # a `replay:` id: recordings are served by the agent factory
            raise UnknownModel(model, "a recording is no provider's model", None)
        client = self._client_for(provider)
        model_class = AnthropicChatModel if provider.protocol == "anthropic" else OpenAIChatModel
        return model_class(
            client,
            model_id,
            provider=provider.name,
            base_url=provider.base_url,
            costs=costs_for(provider.name, model_id, provider),
            policy=self.policy,
            max_tokens=provider.max_tokens_for(model_id),
            settings=provider.settings_for(model_id),
        )

    def http_agent(self, model: str) -> HttpAgent:
        """The external agent for ``http:<name>``.

        Raises:
            UnknownModel: no agent of that name is configured under `agents`.
        """
        require_model_id(self.config, model)
        prefix, name = split_model_id(model)
        agent = self.config.agent(name) if prefix == "http" else None
        if agent is None:
            raise UnknownModel(model, "not an external agent (`http:<name>`)", None)
        key = f"http:{agent.name}"
        if key not in self._clients:
            self._clients[key] = self._new_client(key, agent.timeout_s, headers={})
        return HttpAgent(agent, self._clients[key], policy=self.policy, environ=self._environ)

    def nao_agent(self, model: str) -> NaoBackendAgent:
        """nao's agent for ``nao:<provider>:<model_id>``, on the suite's nao backend; its
        models share one client and one signed-in session.

        Raises:
            UnknownModel: the id is no well-formed `nao:` id.
        """
        require_model_id(self.config, model)
        parsed = nao_model(model)
        if parsed is None:
            raise UnknownModel(model, "not nao's agent (`nao:<provider>:<model_id>`)", None)
        url = nao_backend_url(self.config, self._environ)
        key = f"nao:{url}"
        if key not in self._clients:
            self._clients[key] = self._new_client(
                "the nao backend", self.config.nao_backend.timeout_s, headers={}
            )
            self._nao_sessions[key] = NaoSession(
                self._clients[key], url, policy=self.policy, environ=self._environ
            )
        # The prices configured for the model (nao's spelling → ours) go along, as `nao test`
        # sends those of nao_config.yaml; none configured: the backend prices it itself.
        provider_name, model_id = split_model_id(to_model_id(f"{parsed[0]}:{parsed[1]}"))
        provider = self.config.provider(provider_name)
        configured = provider.model(model_id) if provider is not None else None
        costs = configured.costs if configured is not None else None
        return NaoBackendAgent(
            model,
            self._nao_sessions[key],
            self._clients[key],
            costs=costs,
            tolerance=self.config.test.comparison,
            policy=self.policy,
        )

    def _client_for(self, provider: ProviderConfig) -> LimitedClient:
        if provider.name not in self._clients:
            api_key = provider.api_key.resolve(self._environ) if provider.api_key else None
            headers = (
                anthropic_headers(api_key)
                if provider.protocol == "anthropic"
                else openai_headers(api_key)
            )
            self._clients[provider.name] = self._new_client(
                provider.name, provider.timeout_s, headers=headers
            )
        return self._clients[provider.name]

    def paced(self) -> list[str]:
        """A line for each endpoint whose rate limit, not its answers, set the pace."""
        return [c.pace.report() for c in self._clients.values() if c.pace and c.pace.set_the_pace]

    def _new_client(self, name: str, timeout_s: float, *, headers: dict[str, str]) -> LimitedClient:
        if self._closed:
            raise RuntimeError("this ProviderPool is closed; open a new one")
        transport = self._transport
        if transport is None:
            # Each run has at most one request in flight per endpoint, so `concurrency`
            # connections never make a run wait for another's connection.
            transport = AiohttpTransport(self.concurrency, verify=_tls_context())
        return LimitedClient(
            # `timeout_s` bounds the whole request; httpx's own timeouts bound each read.
            reply_limits=ReplyLimits(
                deadline_s=timeout_s, max_bytes=self.config.limits.response_max_bytes
            ),
            pace=Pace(name),  # the endpoint's rate limit, shared by its runs and judges
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, _CONNECT_TIMEOUT_S)),
            transport=transport,
            verify=_tls_context(),
            follow_redirects=False,
        )

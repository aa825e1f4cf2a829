"""The provider pool: model ids → chat models and agents, one client per endpoint, keys read late."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.agents import (
    AnthropicChatModel,
    ChatMessage,
    OpenAIChatModel,
    ProviderPool,
    ProviderUnavailable,
    UnknownModel,
    split_model_id,
)
from eval_pipeline.agents._providers import (  # the unit itself: its CA bundle cache is reset
    _tls_context,
)
from eval_pipeline.suite import MissingSecret
from eval_pipeline_tests.agents.servers import (
    FAST_RETRY,
    ScriptedServer,
    answer,
    self_signed,
    suite_config,
)


def test_model_ids_split_at_the_first_colon():
    assert split_model_id("openai:gpt-4.1") == ("openai", "gpt-4.1")
    assert split_model_id("ollama:llama3.1:8b") == ("ollama", "llama3.1:8b")
    for bad in ("gpt-4.1", ":gpt-4.1", "openai:"):
        with pytest.raises(UnknownModel, match="provider:model_id"):
            split_model_id(bad)


def test_models_resolve_to_their_provider_protocol(openai_server, anthropic_server):
    config = suite_config(
        openai_server.provider("vllm"), anthropic_server.provider(), openai_server.agent("bot")
    )

    async def go():
        async with ProviderPool(config, environ={}) as pool:
            return (
                pool.chat_model("vllm:qwen3"),
                pool.chat_model("anthropic:claude-haiku-4-5"),
                pool.http_agent("http:bot"),
            )

    vllm, claude, bot = asyncio.run(go())
    assert isinstance(vllm, OpenAIChatModel) and vllm.model_id == "vllm:qwen3"
    assert vllm.url == f"{openai_server.url}/v1/chat/completions"
    assert (
        isinstance(claude, AnthropicChatModel) and claude.model_id == "anthropic:claude-haiku-4-5"
    )
    assert bot.model_id == "http:bot"


def test_unknown_provider_lists_the_configured_ones(openai_server, anthropic_server):
    config = suite_config(openai_server.provider("vllm"), anthropic_server.provider())

    async def go():
        async with ProviderPool(config) as pool:
            pool.chat_model("openai:gpt-4.1")

    with pytest.raises(UnknownModel) as caught:
        asyncio.run(go())
    message = str(caught.value)
    assert "provider 'openai' is not under llm.providers" in message  # the CLI's words
    assert "configured: vllm, anthropic" in message


def test_agents_are_not_chat_models_and_unknown_agents_are_listed(agent_server):
    config = suite_config(agent_server.agent("bot"))

    async def go(call):
        async with ProviderPool(config) as pool:
            call(pool)

    with pytest.raises(UnknownModel, match="external agent"):
        asyncio.run(go(lambda pool: pool.chat_model("http:bot")))
    with pytest.raises(UnknownModel, match="configured: http:bot"):
        asyncio.run(go(lambda pool: pool.http_agent("http:other")))


def test_keys_are_read_only_when_a_provider_is_first_used(openai_server, anthropic_server):
    config = suite_config(
        openai_server.provider(api_key="{{ env('OPENAI_KEY_FOR_TEST') }}"),
        anthropic_server.provider(api_key="{{ env('ANTHROPIC_KEY_NOT_SET') }}"),
    )
    openai_server.script(answer("fine"))

    async def go():
        async with ProviderPool(
            config, policy=FAST_RETRY, environ={"OPENAI_KEY_FOR_TEST": "k"}
        ) as pool:
            model = pool.chat_model("openai:gpt-4.1")
            completion = await model.complete([ChatMessage("user", "q")], tools=[], max_tokens=5)
            with pytest.raises(MissingSecret, match="ANTHROPIC_KEY_NOT_SET"):
                pool.chat_model("anthropic:claude-sonnet-4-5")
            return completion

    assert asyncio.run(go()).text == "fine"


def test_keys_come_from_the_process_environment_by_default(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_KEY_FOR_TEST", "from-env")
    openai_server.script(answer("ok"))
    config = suite_config(openai_server.provider(api_key="{{ env('OPENAI_KEY_FOR_TEST') }}"))

    async def go():
        async with ProviderPool(config, policy=FAST_RETRY) as pool:
            await pool.chat_model("openai:m").complete(
                [ChatMessage("user", "q")], tools=[], max_tokens=5
            )

    asyncio.run(go())
    assert openai_server.last.headers["authorization"] == "Bearer from-env"


def test_one_client_per_provider_reused_across_models(openai_server):
    openai_server.script(answer("a"), answer("b"))
    config = suite_config(openai_server.provider())

    async def go():
        async with ProviderPool(config, policy=FAST_RETRY) as pool:
            for model in ("openai:a", "openai:b"):
                await pool.chat_model(model).complete(
                    [ChatMessage("user", "q")], tools=[], max_tokens=5
                )
            return repr(pool)

    assert asyncio.run(go()) == "ProviderPool(clients=['openai'], concurrency=4)"


def test_a_closed_pool_refuses_new_clients(openai_server):
    config = suite_config(openai_server.provider())

    async def go():
        pool = ProviderPool(config)
        async with pool:
            pass
        pool.chat_model("openai:gpt-4.1")

    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(go())


@pytest.fixture
def fresh_tls_context():
    # The pool loads the CA bundle once per process; these tests change which one it loads.
    _tls_context.cache_clear()
    yield
    _tls_context.cache_clear()


def _complete_over_https(server: ScriptedServer) -> str:
    config = suite_config(server.provider())

    async def go():
        async with ProviderPool(config, policy=FAST_RETRY) as pool:
            completion = await pool.chat_model("openai:m").complete(
                [ChatMessage("user", "q")], tools=[], max_tokens=5
            )
            return completion.text

    return asyncio.run(go())


def test_an_https_provider_is_reached_when_its_certificate_is_trusted(
    tmp_path, monkeypatch, fresh_tls_context
):
    context, certificate = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
    with ScriptedServer("openai", script=[answer("over TLS")], tls=context) as server:
        assert server.base_url.startswith("https://127.0.0.1:")
        assert _complete_over_https(server) == "over TLS"
        assert len(server.requests) == 1


def test_an_https_provider_with_an_untrusted_certificate_is_refused_and_named(
    tmp_path, monkeypatch, fresh_tls_context
):
    context, _ = self_signed(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with ScriptedServer("openai", script=[answer("never")], tls=context) as server:
        with pytest.raises(ProviderUnavailable) as caught:
            _complete_over_https(server)
        assert not server.requests  # nothing was sent over the untrusted connection
    message = str(caught.value)
    assert "could not connect" in message and server.url in message
    assert "certificate verify failed" in message

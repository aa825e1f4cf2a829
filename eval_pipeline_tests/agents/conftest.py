"""Fixtures: scripted OpenAI, Anthropic and agent-protocol servers, started per test on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    """An OpenAI Chat Completions server; `base_url` ends in /v1."""
    with ScriptedServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[ScriptedServer]:
    """An Anthropic Messages server."""
    with ScriptedServer("anthropic") as server:
        yield server


@pytest.fixture
def agent_server() -> Iterator[ScriptedServer]:
    """An external agent speaking the protocol of docs/agent-protocol.md at `base_url`."""
    with ScriptedServer("agent") as server:
        yield server

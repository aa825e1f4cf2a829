"""A provider's rate limit is a pace to keep: many completions at once against a provider that
enforces a requests-per-minute limit all complete, almost none is refused on the way, and the
pool says the limit set the pace."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.agents import ChatMessage, ProviderPool, RequestRejected, RetryPolicy
from eval_pipeline_tests.agents.rate_limits import RateLimit
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, suite_config
from eval_pipeline_tests.agents.steps import Step


async def _complete_all(server: ScriptedServer, count: int) -> tuple[list[str], list[str]]:
    config = suite_config(server.provider(), threads=count)
    async with ProviderPool(config, policy=RetryPolicy(), environ={}) as pool:
        model = pool.chat_model(f"{server.protocol}:gpt-4.1")
        completions = await asyncio.gather(
            *(
                model.complete([ChatMessage("user", f"Question {i}?")], tools=(), max_tokens=100)
                for i in range(count)
            )
        )
        return [c.text for c in completions], pool.paced()


@pytest.mark.parametrize(
    ("protocol", "headers"),
    [("openai", True), ("anthropic", True), ("openai", False)],
    ids=["openai-headers", "anthropic-headers", "retry-after-only"],
)
def test_every_completion_finishes_at_the_limit_and_the_pool_says_it_set_the_pace(
    protocol, headers
):
    # 600 requests a minute, 5 in the bucket at first: 40 completions at once need ~3.5 s.
    limit = RateLimit([answer("12 orders.")], per_minute=600, start=5, protocol=protocol)
    limit.headers = headers
    with ScriptedServer(protocol, script=limit) as server:
        texts, paced = asyncio.run(_complete_all(server, 40))
    assert texts == ["12 orders."] * 40  # every one completed, none became an error
    if headers:
        # The first wave (40 at once, 5 in the bucket) goes before any answer says what the
        # limit is; from then on each request goes when the budget the headers state covers
        # it, and hardly any is refused (a few may race a refill on a busy machine).
        assert limit.refused <= 35 + 3, limit.refusals.most_common(3)
    ((line,),) = (paced,)
    assert f"{protocol}'s rate limit" in line and "set the pace, not the model" in line
    assert f"of {limit.answered + limit.refused} requests waited for it" in line
    assert f"{limit.refused} were answered 429" in line
    if headers:
        assert "600 requests/min" in line


def test_a_used_up_quota_fails_at_once_instead_of_waiting():
    # OpenAI's answer when the account has no credit left: a 429 that no wait will lift.
    body = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    with (
        ScriptedServer("openai", script=[Step("json", status=429, body=body)]) as server,
        pytest.raises(RequestRejected, match="quota is used up"),
    ):
        asyncio.run(_complete_all(server, 1))
    assert len(server.requests) == 1

"""Costs: configured prices win, the built-in table fills in, and an unknown price is None, never 0."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.agents import PRICE_TABLE, Usage, cost_usd, costs_for, table_costs
from eval_pipeline.suite import ModelConfig, ModelCosts, ProviderConfig, SuiteConfig


def config_with(provider: str, model: str, costs: ModelCosts) -> SuiteConfig:
    return SuiteConfig(
        root=Path("."),
        providers=(ProviderConfig(provider, "openai", models=(ModelConfig(model, costs),)),),
    )


def test_configured_costs_win_over_the_table():
    mine = ModelCosts(input_no_cache=1.0, output=1.0)
    assert costs_for("openai", "gpt-4.1", config_with("openai", "gpt-4.1", mine)) == mine
    assert costs_for("openai", "gpt-4.1") == PRICE_TABLE["openai"]["gpt-4.1"]


def test_snapshots_and_aliases_are_priced_as_their_model_but_never_by_prefix():
    assert table_costs("anthropic", "claude-sonnet-4-5-20250929") == table_costs(
        "anthropic", "claude-sonnet-4-5"
    )
    assert table_costs("anthropic", "claude-3-5-haiku-latest") == table_costs(
        "anthropic", "claude-3-5-haiku"
    )
    assert table_costs("openai", "gpt-4.1-2025-04-14") == table_costs("openai", "gpt-4.1")
    assert table_costs("openai", "gpt-4.1-mini") != table_costs("openai", "gpt-4.1")
    assert table_costs("openai", "gpt-4o-2024-05-13").input_no_cache == 5.0  # its own price
    assert table_costs("openai", "gpt-4.1-turbo-imaginary") is None


def test_other_providers_get_no_table_price():
    """A model behind vLLM or a LiteLLM alias has no list price we could know."""
    assert costs_for("litellm", "gpt-4.1") is None
    assert costs_for("ollama", "llama3.1:8b") is None
    mine = ModelCosts(input_no_cache=0.1, output=0.2)
    assert costs_for("litellm", "alias", config_with("litellm", "alias", mine)) == mine


def test_cost_of_cached_and_uncached_input_and_output():
    costs = ModelCosts(input_no_cache=2.0, input_cache_read=0.5, output=8.0)
    usage = Usage(input_tokens=3_000_000, cached_input_tokens=1_000_000, output_tokens=500_000)
    assert cost_usd(usage, costs) == pytest.approx(2 * 2.0 + 1 * 0.5 + 0.5 * 8.0)


def test_cached_tokens_cost_the_input_price_when_no_cache_price_is_known():
    costs = ModelCosts(input_no_cache=2.0, output=8.0)
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=1_000_000, output_tokens=0)
    assert cost_usd(usage, costs) == pytest.approx(2.0)


@pytest.mark.parametrize(
    "costs",
    [
        None,
        ModelCosts(),
        ModelCosts(input_no_cache=2.0),
        ModelCosts(output=8.0, input_cache_read=0.5),
    ],
)
def test_a_missing_price_makes_the_cost_unknown_not_zero(costs):
    assert cost_usd(Usage(input_tokens=10, output_tokens=10), costs) is None


def test_zero_tokens_at_a_known_price_cost_zero():
    assert cost_usd(Usage(), ModelCosts(1.0, 0.1, 2.0)) == 0.0


@given(
    uncached=st.integers(0, 10**7),
    cached=st.integers(0, 10**7),
    output=st.integers(0, 10**7),
)
def test_cost_is_non_negative_and_cache_reads_never_cost_more(uncached, cached, output):
    usage = Usage(input_tokens=uncached + cached, cached_input_tokens=cached, output_tokens=output)
    with_cache = cost_usd(usage, ModelCosts(2.0, 0.5, 8.0))
    without = cost_usd(usage, ModelCosts(2.0, None, 8.0))
    assert 0 <= with_cache <= without


def test_every_table_entry_has_input_and_output_prices():
    for vendor, models in PRICE_TABLE.items():
        for model, costs in models.items():
            assert costs.input_no_cache and costs.output, (vendor, model)
            assert costs.input_cache_read is None or costs.input_cache_read <= costs.input_no_cache

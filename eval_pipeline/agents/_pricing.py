"""What a run cost: the built-in price table, configured prices, and tokens → USD."""

from __future__ import annotations

import re

from eval_pipeline.agents._types import Usage
from eval_pipeline.suite import ModelCosts, ProviderConfig, SuiteConfig

__all__ = ["PRICE_TABLE", "cost_usd", "costs_for", "table_costs"]


def _p(input_no_cache: float, input_cache_read: float | None, output: float) -> ModelCosts:
    return ModelCosts(input_no_cache, input_cache_read, output)


#: USD per million tokens: (input, cached input read, output), by vendor and model id: the
#: vendors' public list prices (standard tier, prompts under any long-context surcharge) as
#: published in late 2025 (2025-12-01). Prices change and new models appear: a `costs` block in
#: eval_config.yaml always wins over this table.
PRICE_TABLE: dict[str, dict[str, ModelCosts]] = {
    "openai": {
        "gpt-5": _p(1.25, 0.125, 10.0),
        "gpt-5.1": _p(1.25, 0.125, 10.0),
        "gpt-5-chat-latest": _p(1.25, 0.125, 10.0),
        "gpt-5-mini": _p(0.25, 0.025, 2.0),
        "gpt-5-nano": _p(0.05, 0.005, 0.40),
        "gpt-4.1": _p(2.0, 0.50, 8.0),
        "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
        "gpt-4o": _p(2.50, 1.25, 10.0),
        # The first gpt-4o snapshot kept its launch price.
        "gpt-4o-2024-05-13": _p(5.0, None, 15.0),
        "gpt-4o-mini": _p(0.15, 0.075, 0.60),
        "o3": _p(2.0, 0.50, 8.0),
        "o4-mini": _p(1.10, 0.275, 4.40),
        "o3-mini": _p(1.10, 0.55, 4.40),
        "o1": _p(15.0, 7.50, 60.0),
    },
    "anthropic": {
        # Cache reads are billed at a tenth of the input price.
        "claude-opus-4-5": _p(5.0, 0.50, 25.0),
        "claude-opus-4-1": _p(15.0, 1.50, 75.0),
        "claude-opus-4": _p(15.0, 1.50, 75.0),
        "claude-opus-4-0": _p(15.0, 1.50, 75.0),
        "claude-sonnet-4-5": _p(3.0, 0.30, 15.0),
        "claude-sonnet-4": _p(3.0, 0.30, 15.0),
        "claude-sonnet-4-0": _p(3.0, 0.30, 15.0),
        "claude-3-7-sonnet": _p(3.0, 0.30, 15.0),
        "claude-haiku-4-5": _p(1.0, 0.10, 5.0),
        "claude-3-5-haiku": _p(0.80, 0.08, 4.0),
        "claude-3-haiku": _p(0.25, 0.03, 1.25),
    },
}

# Snapshot suffixes: "-20250514" (Anthropic), "-2025-04-14" (OpenAI), "-latest" (aliases).
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def table_costs(vendor: str, model_id: str) -> ModelCosts | None:
    """The built-in price of `model_id` at `vendor` (``openai`` or ``anthropic``), if listed.

    A dated snapshot (``claude-sonnet-4-20250514``, ``gpt-4.1-2025-04-14``) or a ``-latest``
    alias is priced as its model unless the table lists the snapshot itself. Names are never
    matched by prefix: ``gpt-4.1-mini`` must not be priced as ``gpt-4.1``.
    """
    prices = PRICE_TABLE.get(vendor)
    if prices is None:
        return None
    name = model_id.strip().lower()
    return prices.get(name) or prices.get(_SNAPSHOT.sub("", name))


def costs_for(
    provider: str, model_id: str, config: SuiteConfig | ProviderConfig | None = None
) -> ModelCosts | None:
    """The prices of `provider:model_id`: the configured `costs` block, else the built-in table.

    The table applies only to providers named ``openai`` or ``anthropic``: a model behind
    another OpenAI-compatible server (vLLM, Ollama, a LiteLLM alias) has no list price that
    we could know, so its cost stays unknown unless configured.

    Args:
        provider: the provider's name, as in the model id.
        model_id: the model id after the ``provider:`` prefix.
        config: the suite configuration (or just the provider's) holding configured prices.

    Returns:
        The prices, or None when neither the configuration nor the table has any.
    """
    provider_config = config.provider(provider) if isinstance(config, SuiteConfig) else config
    if provider_config is not None:
        model = provider_config.model(model_id)
        if model is not None and model.costs is not None:
            return model.costs
    return table_costs(provider, model_id)


def cost_usd(usage: Usage, costs: ModelCosts | None) -> float | None:
    """USD for `usage` at `costs`; None (never 0) when a price that is needed is unknown.

    Cached input tokens are billed at `input_cache_read` when it is known, else at the full
    input price (an upper bound rather than a guess). A missing input or output price makes
    the whole cost unknown, since half a cost would read as a real, too-low number.
    """
    if costs is None or costs.input_no_cache is None or costs.output is None:
        return None
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    cache_price = costs.input_cache_read
    if cache_price is None:
        cache_price = costs.input_no_cache
    total = (
        (usage.input_tokens - cached) * costs.input_no_cache
        + cached * cache_price
        + usage.output_tokens * costs.output
    )
    return total / 1_000_000

"""Model ids are checked by one function: the command line, the agent factory and the pool say the same."""

from __future__ import annotations

import asyncio

import pytest

from eval_pipeline.agents import UnknownModel, require_models
from eval_pipeline.suite import SuiteError
from eval_pipeline_tests.agents.tiny_suite import (
    QUESTIONS,
    make_suite,
    open_factory,
    write_recording,
)


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (
            "mistral:large",
            "provider 'mistral' is not under llm.providers; configured: openai, anthropic",
        ),
        ("replay:dmeo", "no recording recordings/dmeo.jsonl; recordings: replay:demo"),
        ("http:bot", "no such agent under `agents`; configured: (none)"),
        ("gpt-4.1", "expected `provider:model_id`, e.g. openai:gpt-4.1"),
    ],
)
def test_an_unknown_model_reads_the_same_before_the_run_and_during_it(
    tmp_path, openai_server, model, reason
):
    suite = make_suite(tmp_path, openai_server, cases={"q0": QUESTIONS["q0"]})
    write_recording(suite, "demo", {"test": "q0", "turn": 0, "completion": {"text": "0"}})

    with pytest.raises(SuiteError) as before:  # `eval-pipeline test -m`, the sensor
        require_models(suite.config, [model], source="--model")

    async def build() -> None:
        async with open_factory(suite, environ={}) as factory:
            factory.agent(model)

    with pytest.raises(UnknownModel) as during:  # the factory a materialization uses
        asyncio.run(build())
    assert before.value.problems[0].message == f"{model!r}: {reason}"
    assert str(during.value) == f"model {model!r}: {reason}"

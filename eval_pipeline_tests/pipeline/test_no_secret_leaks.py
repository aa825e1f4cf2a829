"""End to end, no file a run leaves behind holds an API key: store, journal, recordings,
cache, results.duckdb, report — nor the logs or any run's error, even when endpoints fail
and echo the key back."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipeline.agents import RunStatus
from eval_pipeline.pipeline import (
    PartitionRuns,
    grade_runs,
    run_partition,
    summarize_partition,
    write_report,
)
from eval_pipeline.store import StateFolder, ensure_database, query
from eval_pipeline.suite import Suite, load_agent_context, load_suite
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    Step,
    agent_reply,
    answer,
    error,
    not_json,
)
from eval_pipeline_tests.agents.tiny_suite import (
    DAY,
    ROUTINE,
    by_prompt,
    open_factory,
    prompt_of,
    write_suite,
)

OPENAI_KEY = "sk-test-LEAK-CANARY-7781"
AGENT_TOKEN = "agt-test-LEAK-CANARY-4410"
SECRETS = (OPENAI_KEY, AGENT_TOKEN, "LEAK-CANARY")
MODELS = ("openai:gpt-4.1", "http:my-agent")

CASES = {
    "answered": {
        "prompt": "What is our revenue?",
        "evaluators": [
            {"name": "gives_a_figure", "criteria": "The reply states a revenue figure."}
        ],
    },
    "key_refused": "Is the key refused?",
    "overloaded": "Is the endpoint overloaded?",
    "garbage": "Does the endpoint answer garbage?",
}


def failures(secret: str) -> dict[str, list[Step]]:
    """Failing endpoints that echo the credential back, as careless proxies do."""
    return {
        "Is the key refused?": [error(401, f"Incorrect API key provided: {secret}")],
        "Is the endpoint overloaded?": [error(500, f"upstream said Bearer {secret}")] * 3,
        "Does the endpoint answer garbage?": [not_json(f"<html>{secret}</html>")],
    }


def llm_script(request: RecordedRequest, index: int) -> Step:
    if prompt_of(request).startswith("Conversation so far"):  # the judge grading a reply
        return answer('{"passed": true, "reasoning": "It states 12 orders."}')
    return ROUTINE(request, index)


def agent_script(_request: RecordedRequest, _index: int) -> Step:
    return agent_reply(
        "Revenue is 780 USD.",
        tool_calls=[{"name": "execute_sql", "arguments": {"sql_query": "SELECT 1"}}],
        usage={"input_tokens": 10, "output_tokens": 5},
    )


@pytest.fixture
def suite(tmp_path, monkeypatch, openai_server, agent_server) -> Suite:
    monkeypatch.setenv("EVAL_TEST_OPENAI_KEY", OPENAI_KEY)
    monkeypatch.setenv("EVAL_TEST_AGENT_TOKEN", AGENT_TOKEN)
    openai_server.set_script(by_prompt(failures(OPENAI_KEY), default=llm_script))
    agent_server.set_script(by_prompt(failures(AGENT_TOKEN), default=agent_script))
    root = write_suite(
        tmp_path / "suite",
        cases=CASES,
        providers=[
            {
                "provider": "openai",
                "base_url": openai_server.base_url,
                "api_key": "{{ env('EVAL_TEST_OPENAI_KEY') }}",
                "timeout_s": 5,
            }
        ],
        agents=[
            {
                "name": "my-agent",
                "url": agent_server.base_url,
                "headers": {
                    "Authorization": "Bearer {{ env('EVAL_TEST_AGENT_TOKEN') }}",
                    "X-Api-Token": "{{ env('EVAL_TEST_AGENT_TOKEN') }}",
                },
                "timeout_s": 5,
            }
        ],
        judge_model="openai:gpt-4.1",
    )
    return load_suite(root)


def evaluate(suite: Suite) -> list[PartitionRuns]:
    """Runs (recorded) of both models, then grades, summaries, the report and the SQL views."""
    layout = StateFolder(suite.config.state_path)
    ensure_database(layout)
    context = load_agent_context(suite.config)

    async def go() -> list[PartitionRuns]:
        outcomes = []
        async with open_factory(suite, recording=True) as factory:
            for model in MODELS:
                outcome = await run_partition(
                    suite,
                    model,
                    DAY,
                    layout=layout,
                    agent_for=factory.agent,
                    context_hash=factory.context.hash,
                )
                outcomes.append(outcome)
        for model in MODELS:
            await grade_runs(suite, model, DAY, layout=layout, context=context)
            summarize_partition(suite, model, DAY, layout=layout)
        return outcomes

    outcomes = asyncio.run(go())
    write_report(layout, DAY)
    return outcomes


def texts_of(path: Path) -> list[str]:
    """What a file holds, readably: its bytes, and for Parquet (compressed) its values."""
    texts = [path.read_bytes().decode("latin-1")]
    if path.suffix == ".parquet":
        texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return texts


def test_no_key_in_any_file_log_or_error(suite, openai_server, agent_server, caplog):
    caplog.set_level(logging.DEBUG)
    outcomes = evaluate(suite)

    # The keys were really sent, and the endpoints really echoed them back.
    assert f"Bearer {OPENAI_KEY}" in openai_server.requests[0].headers["authorization"]
    assert agent_server.requests[0].headers["x-api-token"] == AGENT_TOKEN
    # Failures happened, and were reported with the echoed key blanked out.
    for outcome in outcomes:
        errors = {r.case_name: r.error for r in outcome.runs if r.status is RunStatus.ERROR}
        assert sorted(errors) == ["garbage", "key_refused", "overloaded"]
        assert "[redacted]" in errors["key_refused"] and "(HTTP 401)" in errors["key_refused"]
        assert "after 3 attempts" in errors["overloaded"]
        for text in errors.values():
            assert not any(secret in text for secret in SECRETS), text
    layout = StateFolder(suite.config.state_path)
    grades = query(layout, "SELECT model, name, status, message FROM grades ORDER BY 1, 2")
    assert grades.status.tolist() == ["passed", "error", "error", "error"] * 2
    assert "retrying" in caplog.text  # the 500s were logged...
    assert not any(secret in caplog.text for secret in SECRETS)  # ...without the key

    files = [p for p in suite.root.rglob("*") if p.is_file()]
    names = {p.relative_to(suite.root).as_posix() for p in files}
    # Every kind of file a run leaves behind is there to be checked.
    for expected in [
        "recordings/openai-gpt-4.1.jsonl",
        ".eval/results.duckdb",
        f".eval/reports/report_{DAY.isoformat()}.md",
    ]:
        assert expected in names
    for prefix in [
        ".eval/store/agent_runs/",
        ".eval/store/tool_calls/",
        ".eval/store/grades/",
        ".eval/store/model_summaries/",
        ".eval/cache/completions/",
    ]:
        assert any(name.startswith(prefix) for name in names), prefix
    leaks = [
        (path.relative_to(suite.root).as_posix(), secret)
        for path in files
        for text in texts_of(path)
        for secret in SECRETS
        if secret in text
    ]
    assert leaks == []

"""A nao project's provider spellings and per-model `settings`, as nao's own loader reads them:
every spelling of its OpenAI-compatible kind runs, and each model's settings reach the wire
and are inputs of its runs."""

from __future__ import annotations

import json

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project

pytestmark = pytest.mark.slow

_DECLARED = "    - provider: openaiCompatible/vllm\n"
_MODEL = "        - id: qwen3\n"


def _rewrite(project, old: str, new: str) -> None:
    path = project / "nao_config.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")


def _evaluate(project):
    (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
    return run_cli(
        "test",
        "--date",
        DAY,
        "--format",
        "json",
        cwd=project,
        env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"},
    )


@pytest.mark.parametrize(
    "declared",
    [
        "    - provider: openaiCompatible\n      name: vllm\n",
        "    - provider: openai-compatible/vllm\n",
        "    - provider: openai_compatible\n      name: VLLM\n",
        "    - provider: openaicompatible/vllm\n",
    ],
    ids=["name-field", "dashed", "underscored-upper-name", "lower-case"],
)
def test_every_spelling_nao_reads_runs_the_declared_endpoint(tmp_path, declared):
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        _rewrite(project, _DECLARED, declared)
        result = _evaluate(project)
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr  # one test fails, none errors
    assert "no provider" not in result.stderr
    assert {r.json["model"] for r in server.requests} == {"qwen3"}
    verdicts = {r["name"]: r["passed"] for r in json.loads(result.stdout)["results"]}
    assert verdicts == {"total_revenue": True, "order_count": False}


def test_a_models_settings_reach_every_request_and_an_edit_runs_it_again(tmp_path):
    settings = (
        "        - id: qwen3\n"
        "          settings:\n"
        "            temperature: 0.1\n"
        "            max_tokens: 777\n"
        "            reasoning_effort: low\n"
    )
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        _rewrite(project, _MODEL, settings)
        first = _evaluate(project)
        sent = server.requests
        unchanged = _evaluate(project)
        after_unchanged = len(server.requests)
        _rewrite(project, "temperature: 0.1", "temperature: 0.3")
        edited = _evaluate(project)
        resent = server.requests[after_unchanged:]
    for result in (first, unchanged, edited):
        no_traceback(result)
        assert result.returncode == 1, result.stdout + result.stderr
    assert sent and all(
        (r.json["temperature"], r.json["max_tokens"], r.json["reasoning_effort"])
        == (0.1, 777, "low")
        for r in sent
    )
    assert after_unchanged == len(sent)  # nothing edited: no request
    assert resent and {r.json["temperature"] for r in resent} == {0.3}  # the edit re-ran both


def test_a_setting_the_protocol_has_no_field_for_is_named_with_its_line(tmp_path):
    project = write_nao_project(tmp_path / "shop")
    _rewrite(project, _MODEL, _MODEL + "          settings: {thinking_budget: 2048}\n")
    result = _evaluate(project)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nao_config.yaml" in result.stderr
    assert "llm.providers[0].models[0].settings.thinking_budget" in result.stderr
    assert "temperature" in result.stderr  # what it does take

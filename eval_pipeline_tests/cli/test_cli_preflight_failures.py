"""The real `eval-pipeline test` when a secret is missing or a Dagster step fails: one line.

A newcomer ran `eval-pipeline test -m openai:gpt-4.1` without OPENAI_API_KEY and got a Dagster
stack trace from the agent_runs step (exit 3). A missing secret is a configuration mistake
found before any work (exit 2); a step that does fail prints our one line naming the step,
not Dagster's ERROR event with its stack trace (that stays in the instance).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.cli.console import cli_env, run_cli, run_cli_subprocess
from eval_pipeline_tests.cli.replay_suite import write_suite

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("preflight") / "suite")


@pytest.fixture
def suite(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "suite"))


def without_keys() -> dict[str, str]:
    return {k: v for k, v in cli_env().items() if not k.endswith("_API_KEY")}


def test_a_missing_api_key_exits_2_naming_the_variable_and_field_before_any_work(suite):
    result = run_cli("test", "-m", "openai:gpt-4.1", "-q", cwd=suite, env=without_keys())
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "dagster" not in result.stderr.lower()
    assert "OPENAI_API_KEY" in result.stderr
    assert "llm.providers[openai].api_key" in result.stderr
    assert not (suite / ".eval" / "dagster_home").exists()  # no step was started


def test_a_missing_judge_key_exits_2_naming_the_judge(suite):
    config = yaml.safe_load((suite / "eval_config.yaml").read_text())
    config["test"]["judge_model"] = "openai:gpt-4.1-mini"
    (suite / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_cli("test", "-q", cwd=suite, env=without_keys())
    assert result.returncode == 2, result.stdout + result.stderr
    assert "OPENAI_API_KEY" in result.stderr and "test.judge_model" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_failed_step_prints_one_line_and_no_dagster_stack_trace(suite, tmp_path):
    """A step made to fail by a fault injected into the agent stage (sitecustomize runs in the
    console script's interpreter before the pipeline is imported)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import eval_pipeline.pipeline.stages as stages\n"
        "async def broken(*args, **kwargs):\n"
        "    raise RuntimeError('injected failure of the agent stage')\n"
        "stages.run_agents = broken\n"
    )
    env = cli_env()
    env["PYTHONPATH"] = f"{hook}:{env.get('PYTHONPATH', '')}"
    # A subprocess: the fault is injected where an interpreter starts.
    result = run_cli_subprocess("test", "--date", "2026-01-01", "-q", cwd=suite, env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: eval-pipeline test could not run: ")
    assert "agent" in lines[0] and "injected failure" in lines[0]

"""Secrets are needed only when something is sent: an unchanged rerun, which sends nothing, starts without the account of nao's backend or a provider's key; a rerun that must send still stops with exit 2 naming the variable, before anything runs."""

from __future__ import annotations

import pytest

from eval_pipeline_tests.agents.nao_backend import fake_nao_backend
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.cli.test_cli_nao_backend import MODEL, NAO_ARGS, write_project
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project

pytestmark = pytest.mark.slow

#: What an unchanged rerun says instead of running anything.
NOTHING_CHANGED = f"nothing changed since the last evaluation of {DAY}"


def _without(*variables: str) -> dict[str, str]:
    return {k: v for k, v in cli_env().items() if k not in variables}


def test_an_unchanged_rerun_of_naos_agent_needs_no_account(tmp_path):
    account = ("NAO_USERNAME", "NAO_PASSWORD")
    args = ("test", "--date", DAY, "-s", "total_revenue")
    with fake_nao_backend() as backend:
        project = write_project(
            tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=backend.url
        )
        first = run_cli(*args, *NAO_ARGS, cwd=project, env=_without(*account))
        assert first.returncode == 0, first.stdout + first.stderr

        again = run_cli(*args, "-m", MODEL, cwd=project, env=_without(*account))

        no_traceback(again)
        assert again.returncode == 0, again.stdout + again.stderr
        assert NOTHING_CHANGED in again.stdout + again.stderr
        assert len(backend.runs) == 1  # nothing was sent

        # An edited prompt must be sent: the account is needed, as before.
        test_file = project / "tests" / "total_revenue.yml"
        test_file.write_text(test_file.read_text().replace("total revenue", "revenue"))
        edited = run_cli(*args, "-m", MODEL, cwd=project, env=_without(*account))
    no_traceback(edited)
    assert edited.returncode == 2, edited.stdout + edited.stderr
    assert "a secret the run needs is missing; nothing was run" in edited.stderr
    assert (
        f"environment variable NAO_USERNAME is not set; {MODEL} (--model) signs in to nao's "
        "backend with it"
    ) in edited.stderr
    assert len(backend.runs) == 1


def test_an_unchanged_rerun_of_a_provider_needs_no_key(tmp_path):
    args = ("test", "--date", DAY)
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        first = run_cli(*args, cwd=project, env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"})
        assert first.returncode == 1, first.stdout + first.stderr  # order_count is wrong
        sent = len(server.requests)

        again = run_cli(*args, cwd=project, env=_without(KEY_VARIABLE))

        no_traceback(again)
        assert again.returncode == 1, again.stdout + again.stderr  # the same verdicts
        assert NOTHING_CHANGED in again.stdout + again.stderr
        assert len(server.requests) == sent

        # -k 2 asks for a second attempt: it must be sent, so the key is needed.
        more = run_cli(*args, "-k", "2", cwd=project, env=_without(KEY_VARIABLE))
    no_traceback(more)
    assert more.returncode == 2, more.stdout + more.stderr
    assert (
        f"environment variable {KEY_VARIABLE} is not set; openaiCompatible/vllm:qwen3 "
        "(test.models) needs it"
    ) in more.stderr
    assert len(server.requests) == sent

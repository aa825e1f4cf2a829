"""`eval-pipeline test` on a database whose role can do more than read: refused with the recipe, or warned."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer, answer, repeat
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli

pytestmark = pytest.mark.slow


def _suite(root: Path, base_url: str, database_options: str) -> Path:
    (root / "cases").mkdir(parents=True)
    (root / "eval_config.yaml").write_text(
        textwrap.dedent(f"""\
            databases:
              - {{name: finance, type: postgres, url: "{{{{ env('FINANCE_URL') }}}}"{database_options}}}
            llm:
              providers:
                - {{provider: openai, base_url: "{base_url}", timeout_s: 10}}
            test:
              models: [openai:gpt-4.1]
            """)
    )
    (root / "cases" / "hello.yml").write_text("prompt: Say hello.\n")
    return root


def _run(root: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "FINANCE_URL": url, "OPENAI_API_KEY": "sk-test-key"}
    result = run_cli("test", "--date", "2026-04-01", cwd=root, env=env)
    no_traceback(result)
    return result


def test_a_superuser_is_refused_with_the_read_only_role_to_create_unless_allowed(
    tmp_path, postgres
):
    owner = postgres.owner
    with ScriptedServer("openai", script=repeat(answer("Hello."))) as llm:
        refused = _run(_suite(tmp_path / "refused", llm.base_url, ""), owner.url)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "the role can do more than read (superuser" in refused.stderr
        assert "CREATE ROLE eval_reader LOGIN PASSWORD" in refused.stderr
        assert "allow_privileged_role: true" in refused.stderr
        assert not llm.requests  # nothing ran
        allowed = _run(
            _suite(tmp_path / "allowed", llm.base_url, ", allow_privileged_role: true"), owner.url
        )
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "warning: database 'finance' has allow_privileged_role: true" in allowed.stderr
    assert owner.password not in refused.stderr + allowed.stderr + allowed.stdout

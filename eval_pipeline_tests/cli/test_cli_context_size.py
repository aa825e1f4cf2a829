"""A context file too large for any model is refused before anything runs, with its size and the limit, through `eval-pipeline test`."""

from __future__ import annotations

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "local:agent")
LINE = "Revenue counts shipped orders only; cancelled orders never count.\n"


def _suite(root, server, rules_bytes: int, limits: str = ""):
    root = write_suite(
        root,
        cases={"orders": {"prompt": "How many orders?", "sql": "SELECT count(*) AS n FROM orders"}},
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
        dbt=False,
    )
    (root / "RULES.md").write_text(LINE * (rules_bytes // len(LINE) + 1), encoding="utf-8")
    if limits:
        config = root / "eval_config.yaml"
        config.write_text(config.read_text() + limits)
    return root


def test_a_context_file_past_the_limit_is_refused_naming_its_size_and_the_limit(tmp_path):
    with ScriptedServer("openai") as server:
        root = _suite(tmp_path / "suite", server, 3_000_000)
        refused = run_cli(*ARGS, cwd=root)
        no_traceback(refused)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert server.requests == []
    size = (root / "RULES.md").stat().st_size
    said = refused.stderr
    assert f"RULES.md: is 3.0 MB ({size:,} bytes, about {size // 4:,} tokens)" in said, said
    assert "2,000,000 bytes together (limits.context_max_bytes, about 500,000 tokens)" in said
    assert not (root / ".eval" / "store").exists()


def test_a_context_within_a_raised_limit_runs(tmp_path):
    with ScriptedServer("openai") as server:
        root = _suite(
            tmp_path / "suite", server, 3_000_000, "limits:\n  context_max_bytes: 4000000\n"
        )
        ran = run_cli(*ARGS, cwd=root)
        no_traceback(ran)
        assert "context_max_bytes" not in ran.stdout + ran.stderr
        assert len(server.requests) >= 1

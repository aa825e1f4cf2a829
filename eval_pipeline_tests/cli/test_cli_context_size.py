"""A context file too large for any model is refused before anything runs, with its size and the limit, and a context within the limit is stored once, not with every run, through `eval-pipeline test`."""

from __future__ import annotations

import html
import secrets
from datetime import date

import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline.suite import load_suite
from eval_pipeline.viewer import run_id
from eval_pipeline_tests.agents.servers import ScriptedServer, system_text
from eval_pipeline_tests.agents.tiny_suite import by_prompt, write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli, sql_rows
from eval_pipeline_tests.viewer.conftest import fetch, start

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "local:agent")
LINE = "Revenue counts shipped orders only; cancelled orders never count.\n"


def _suite(root, server, rules_bytes: int, limits: str = "", tests: int = 1):
    root = write_suite(
        root,
        cases={
            f"orders_{i}": {"prompt": f"How many orders? ({i})", "sql": "SELECT 12 AS n"}
            for i in range(tests)
        },
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


MARKER = "MARKER-context-5d1e"


def test_a_context_is_stored_once_and_the_viewer_shows_the_prompt_as_sent(tmp_path):
    """A 1 MB RULES.md, three tests evaluated twice: every request carries the file, the
    store keeps its text once (each run's system message refers to it by the context's
    hash), and the run page shows the system prompt as the model got it."""
    with ScriptedServer("openai", script=by_prompt({})) as server:
        root = _suite(tmp_path / "suite", server, 0, tests=3)
        # Text that does not compress (as a real file's 1 MB hardly does), so the store's
        # size says how many times it is kept.
        lines = [MARKER, *(secrets.token_hex(32) for _ in range(15_000))]
        (root / "RULES.md").write_text("\n".join(lines), encoding="utf-8")
        for extra in ((), ("--no-cache",)):
            done = run_cli(*ARGS, *extra, cwd=root)
            no_traceback(done)
            assert done.returncode == 0, done.stdout + done.stderr
        sent = {system_text(r, "openai") for r in server.requests}
    (prompt,) = sent
    assert MARKER in prompt and len(prompt) > 950_000
    assert sql_rows(root, "SELECT count(*) FROM agent_runs_history") == [["6"]]
    assert sql_rows(root, "SELECT count(*) FROM agent_contexts") == [["1"]]
    assert sql_rows(
        root, f"SELECT count(*) FROM agent_runs_history WHERE messages LIKE '%{MARKER}%'"
    ) == [["0"]]
    # Six runs (3.7 MB when each kept the file), the file's text once (0.6 MB).
    store = root / ".eval" / "store"
    stored = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    assert stored < 2 * (root / "RULES.md").stat().st_size, f"{stored:,} bytes in the store"

    layout = StateFolder.of(load_suite(root).config)
    viewer, thread = start(layout)
    try:
        page = fetch(
            viewer, f"/run/{run_id('orders_0', 'local:agent', date.fromisoformat(DAY), 0)}"
        )
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(timeout=10)
    assert page.status == 200
    assert f"system prompt · {len(prompt):,} characters" in page.text
    assert html.escape(MARKER) in page.text and "## RULES.md" in page.text

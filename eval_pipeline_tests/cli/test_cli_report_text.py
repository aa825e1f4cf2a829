"""Agent text and long model ids in what `eval-pipeline test` prints and writes.

Three endpoints answer one data test through the real console script: an agent whose
answer cell and reply hold rich markup (`[/x]`), an emoji code (`:a:`) and control
characters XML forbids; an agent named `a` that answers 400 (its message starts
`http:a: …`); and an OpenAI-compatible server whose model id is a long file path, also
answering 400. The report must show all of it as plain text, with the cause readable.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest
import yaml

from eval_pipeline_tests.agents.servers import ScriptedServer, agent_reply, error, repeat
from eval_pipeline_tests.cli.console import cli_env, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, write_suite

pytestmark = pytest.mark.slow

HOSTILE = "[/x] [bold]b[/bold] :a: bell\x07 esc\x1b[31m nul\x00"
LONG_MODEL = (
    "local:/srv/models/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct-GGUF/snapshots/"
    "9217f5db79a29953eb74d5343926648285ec7e67/qwen2.5-0.5b-instruct-q4_k_m.gguf"
)
MODELS = ("http:talker", "http:a", LONG_MODEL)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory):
    talker = ScriptedServer(
        "agent",
        script=repeat(agent_reply(HOSTILE, answer={"columns": ["customer"], "rows": [[HOSTILE]]})),
    ).start()
    refusing = ScriptedServer("agent", script=repeat(error(400, "bad request"))).start()
    local = ScriptedServer("openai", script=repeat(error(400, "model not loaded"))).start()
    root = write_suite(tmp_path_factory.mktemp("report_text") / "suite")
    config = yaml.safe_load((root / "eval_config.yaml").read_text())
    config["agents"] = [
        {"name": "talker", "url": talker.base_url},
        {"name": "a", "url": refusing.base_url},
    ]
    config["llm"]["providers"].append(
        {"provider": "local", "base_url": local.base_url, "models": [LONG_MODEL.split(":", 1)[1]]}
    )
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    yield root
    for server in (talker, refusing, local):
        server.stop()
    shutil.rmtree(root, ignore_errors=True)


def _models() -> list[str]:
    return [arg for model in MODELS for arg in ("-m", model)]


def _row(out: str, model: str) -> str:
    """The results table's row of top_customer for the model."""
    rows = [
        line
        for line in out.splitlines()
        if line.strip().startswith("top_customer") and model in line
    ]
    assert rows, out
    return rows[0]


def test_agent_text_is_never_markup_and_the_cause_survives_a_long_model_id(suite):
    result = run_cli("test", "--date", DAY, "-s", "top_customer", *_models(), cwd=suite)
    # A failed test and two error runs (agents refusing the request), not a crash.
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    out = result.stdout
    rows = {
        model: _row(out, tag)
        for model, tag in (("talker", "http:talker"), ("a", "http:a "), ("local", "local:"))
    }
    assert "[/x] [bold]b[/bold] :a:" in rows["talker"]  # the answer cell, as the agent sent it
    assert "http:a: " in rows["a"] and "🅰" not in out  # not an emoji
    assert "(HTTP 400)" in rows["local"]  # the cause, after the long id
    assert "local:…/qwen2.5-0.5b-instruct-q4_k_m.gguf" in rows["local"]
    assert "3 failed" in out or "0/3 passed" in out


def test_on_a_terminal_control_characters_in_agent_text_are_shown_as_escapes(suite):
    """rich passes ESC through: a reply's `ESC [31m` would reach the terminal as an order."""
    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0", "COLUMNS": "200"}
    result = run_cli(
        "test", "--date", DAY, "-s", "top_customer", "-m", "http:talker", "-v",
        cwd=suite, env={**cli_env(), **terminal},
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "esc\x1b[31m" not in out and "\x07" not in out and "\x00" not in out
    assert "bell\\x07 esc\\x1b[31m nul\\x00" in result.stdout  # the reply, in -v and the table


def test_junit_with_control_characters_in_a_reply_is_well_formed_xml(suite, tmp_path):
    path = tmp_path / "junit.xml"
    result = run_cli(
        "test", "--date", DAY, "-s", "top_customer", "-m", "http:talker",
        "--format", "junit", "-o", str(path), cwd=suite,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    root = ET.parse(path).getroot()  # raises on a NUL, ESC or BEL
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None
    assert "bell\\x07 esc\\x1b[31m nul\\x00" in failure.text  # shown, not dropped silently
    assert "[/x] [bold]b[/bold] :a:" in failure.text

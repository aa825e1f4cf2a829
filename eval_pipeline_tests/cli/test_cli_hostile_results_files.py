"""Results files from others (nao's, a CI artefact) through every command that prints them.

A test name, a model id and a message may hold terminal escape sequences: OSC 52 writes
the clipboard, `ESC [2J` clears the screen, a carriage return overwrites what the line
said. Each command shows them as text (`\\x1b]52;…`), on a terminal as in a pipe. A file
nested too deep to read, or holding a number no run has (`cost: 1e308`), is the user's
input: one line naming the file and the field, exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli

#: What a hostile file puts in its text: the clipboard, a cleared screen, a line overwritten.
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J"
HOSTILE_NAME = f"revenue{CLIPBOARD}{CLEAR}\rPASS"
HOSTILE_MODEL = f"openai:gpt{CLEAR}"
HOSTILE_MESSAGE = f"row count{CLIPBOARD} 1 vs 2"
#: What the commands print instead: the same characters, as escapes.
SHOWN_NAME = "revenue\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\rPASS"
SHOWN_MODEL = "openai:gpt\\x1b[2J"
#: A terminal, as rich decides it (the progress and report consoles).
TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0", "COLUMNS": "200", "NO_COLOR": "1"}


def _entry(name: str, passed: bool, *, model: str = HOSTILE_MODEL) -> dict:
    """A run as nao writes it."""
    fields = {"tokens": 100, "cost": 0.01, "duration_ms": 1500, "tool_call_count": 2}
    return {"name": name, "model": model, "passed": passed, "message": HOSTILE_MESSAGE, **fields}


def _write(path: Path, *entries: dict, day: str = "2026-11-02") -> Path:
    path.write_text(json.dumps({"timestamp": f"{day}T12:00:00", "results": list(entries)}))
    return path


def _no_escape_reaches_the_terminal(text: str) -> None:
    assert "\x1b]52" not in text and CLEAR not in text and "\x07" not in text, repr(text)
    assert "\r" not in text, repr(text)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", cases={"q0": "What is the revenue?"}, dbt=False)


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    before = _write(tmp_path / "before.json", _entry(HOSTILE_NAME, True), day="2026-11-02")
    after = _write(tmp_path / "after.json", _entry(HOSTILE_NAME, False), day="2026-11-03")
    return before, after


def run(*args: str, cwd: Path) -> tuple[int, str, str]:
    result = run_cli(*args, cwd=cwd, env={**cli_env(), **TERMINAL})
    no_traceback(result)
    return result.returncode, result.stdout, result.stderr


def test_diff_of_two_files_shows_escape_sequences_as_text(suite, two_files):
    code, out, err = run("diff", *map(str, two_files), cwd=suite)
    assert code == 1, out + err  # the regression, still found and said
    _no_escape_reaches_the_terminal(out + err)
    row = next(line for line in out.splitlines() if "regression" in line)
    assert SHOWN_NAME in row and SHOWN_MODEL in row and "PASS → FAIL" in row


def test_summary_shows_escape_sequences_as_text(suite, two_files):
    code, out, err = run("summary", "-f", str(two_files[0]), cwd=suite)
    assert code == 0, out + err
    _no_escape_reaches_the_terminal(out + err)
    assert SHOWN_MODEL in out


def test_import_results_and_what_reads_the_store_show_escape_sequences_as_text(suite, two_files):
    code, out, err = run("import-results", *map(str, two_files), cwd=suite)
    assert code == 0, out + err
    _no_escape_reaches_the_terminal(out + err)
    code, out, err = run(
        "diff", "--base", "2026-11-02", "--date", "2026-11-03", "--model", "openai:gpt\x1b[2J",
        cwd=suite,
    )  # fmt: skip
    assert code == 1, out + err
    _no_escape_reaches_the_terminal(out + err)
    assert f"regressed (1): {SHOWN_NAME}" in out
    code, out, err = run("sql", "SELECT name, model, message FROM grades", cwd=suite)
    assert code == 0, out + err
    _no_escape_reaches_the_terminal(out + err)
    assert "revenue\\x1b]52" in out
    code, out, err = run("export", "--format", "html", "--date", "2026-11-03", cwd=suite)
    assert code == 0, out + err
    _no_escape_reaches_the_terminal(out + err)
    assert "revenue\\x1b]52" in out  # the page shows them too


def test_a_skipped_file_is_named_with_its_bad_value_shown_as_text(suite, tmp_path):
    bad = _write(tmp_path / "bad.json", {**_entry("t", True), "model": f"no-provider{CLEAR}"})
    code, out, err = run("import-results", str(bad), cwd=suite)
    assert code == 2, out + err
    _no_escape_reaches_the_terminal(out + err)
    assert f"skipped {bad}: results[0].model: expected `provider:model_id`" in err
    assert "\\u001b[2J" in err  # as the JSON spells it


def test_a_file_nested_too_deep_is_one_line_naming_it(suite, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"results": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    good = _write(tmp_path / "good.json", _entry("t", True))
    for args in (("summary", "-f", str(deep)), ("diff", str(good), str(deep))):
        code, out, err = run(*args, cwd=suite)
        assert code == 2, out + err
        assert err.startswith(f"error: {deep}: ") and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cost", 1e308),
        ("duration_ms", 1e308),
        ("tokens", 1e308),
        ("tool_call_count", 10**400),
        ("cost", -1),
    ],
)
def test_a_number_no_run_has_is_refused_naming_the_field(suite, tmp_path, field, value):
    path = tmp_path / "results.json"
    entry = {**_entry("t", True, model="openai:gpt-a"), field: value}
    # 10**400 is no JSON a library writes, but a file may hold it (and `1e999` reads as inf).
    path.write_text(json.dumps({"results": [entry, entry]}).replace("1e+308", "1e308"))
    code, out, err = run("summary", "-f", str(path), cwd=suite)
    assert code == 2, out + err
    assert err.startswith(f"error: {path}: results[0].{field}: expected "), err
    assert "inf" not in err and len(err) < 300, err

"""`eval-pipeline` on suite commands: listing, CSV import, bad input."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest

from eval_pipeline_tests.cli.console import run_cli

# Every test runs an `eval-pipeline` command.
pytestmark = pytest.mark.slow


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    (root / "cases" / "revenue").mkdir(parents=True)
    (root / "eval_config.yaml").write_text("test:\n  models: [replay:demo]\n")
    (root / "cases" / "revenue" / "total.yml").write_text(
        "name: total_revenue\nprompt: Total revenue?\nsql: SELECT 1 AS revenue_usd\ntags: [revenue]\n"
    )
    (root / "cases" / "chat.yml").write_text(
        "prompt: Hello?\nevaluators: [{name: polite, criteria: Is polite}]\n"
    )
    return root


def test_list_from_inside_the_suite_folder(suite):
    result = run_cli("list", cwd=suite)
    assert result.returncode == 0, result.stderr
    assert (
        "total_revenue" in result.stdout and "data" in result.stdout and "revenue" in result.stdout
    )
    assert "2 test(s)" in result.stdout


def test_list_with_unknown_selection_exits_2_and_lists_tests(suite):
    result = run_cli("list", "--suite", str(suite), "-s", "nope", cwd=suite.parent)
    assert result.returncode == 2
    assert "unknown test selection; available tests: chat, total_revenue" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_test_file_exits_2_naming_file_and_field(suite):
    (suite / "cases" / "broken.yml").write_text(
        "prompt: hi\nassertions:\n  - {type: tool_call, tool: x, min_count: 0}\n"
    )
    result = run_cli("list", cwd=suite)
    assert result.returncode == 2
    assert (
        "cases/broken.yml:3: assertions[0].min_count: expected an integer ≥ 1, got 0"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_import_csv_writes_files_and_refuses_a_second_import(suite, tmp_path):
    path = tmp_path / "tests.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "conversation_history", "tool_calls"])
        writer.writerow(
            [
                "lists tables",
                '[{"role": "user", "content": "What data do you have?"}]',
                '[{"tool": "list_tables", "accept_any_arguments": true}]',
            ]
        )
    first = run_cli("import-csv", str(path), "--into", "imported", cwd=suite)
    assert first.returncode == 0, first.stderr
    assert (suite / "cases" / "imported" / "lists_tables.yaml").exists()
    assert "lists tables" in run_cli("list", cwd=suite).stdout
    before = sorted(p.name for p in suite.rglob("*.yaml"))
    second = run_cli("import-csv", str(path), cwd=suite)
    assert second.returncode == 2
    assert (
        "tests.csv:row 2: name: test 'lists tables' already exists (cases/imported/lists_tables.yaml)"
        in second.stderr
    )
    assert sorted(p.name for p in suite.rglob("*.yaml")) == before


def test_import_csv_with_broken_json_exits_2(suite, tmp_path):
    path = tmp_path / "broken.csv"
    path.write_text('name,conversation_history,tool_calls\nx,"[{""role"": ""user""",[]\n')
    result = run_cli("import-csv", str(path), cwd=suite)
    assert result.returncode == 2
    assert "broken.csv:row 2: conversation_history: is not valid JSON" in result.stderr


def test_default_suite_is_tests_suite_below_the_current_folder(suite, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(suite, project / "tests_suite")
    result = run_cli("list", cwd=project)
    assert result.returncode == 0 and "total_revenue" in result.stdout


def _alias_bomb() -> str:
    """An `exact` matcher's value holding ~500 bytes of aliases that stand for 9**9 strings."""
    head = "prompt: hi\ntool_calls:\n  - tool: t\n    arguments:\n      a:\n        match_type: exact\n        value:\n"
    levels = ["          l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"          l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    return head + "\n".join(levels) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_alias_bomb(), "cases/bad.yml:12: aliases expand to more than 10,000 values"),
        ("prompt: hi\ntags: " + "[" * 20_000 + "]" * 20_000, "cases/bad.yml:2: nested more than"),
        ("prompt: hi\nnotes:\n  ? [a, b]\n  : c\n", "cases/bad.yml:3: a mapping key must be"),
    ],
    ids=["alias bomb", "20000 nested [", "complex key"],
)
def test_exploding_test_files_are_refused_with_file_and_line(suite, text, expected):
    (suite / "cases" / "bad.yml").write_text(text)
    result = run_cli("list", cwd=suite)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_replay_name_with_a_path_is_refused_before_anything_is_read(suite, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jsonl").write_text("")  # a recording outside the suite, which must stay unread
    result = run_cli("test", "-m", "replay:../../outside/x", cwd=suite)
    assert result.returncode == 2, result.stderr
    assert "'replay:../../outside/x': a recording name is a plain file name" in result.stderr
    assert "Traceback" not in result.stderr

    config = suite / "eval_config.yaml"
    config.write_text("test:\n  models: [replay:demo]\n  judge_model: replay:../outside/x\n")
    result = run_cli("list", cwd=suite)
    assert result.returncode == 2
    assert (
        "eval_config.yaml:3: test.judge_model: 'replay:../outside/x': a recording" in result.stderr
    )


def _one_test_csv(path: Path, history: str = '[{"role": "user", "content": "Hi?"}]') -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "conversation_history", "tool_calls"])
        writer.writerow(["greets", history, '[{"tool": "t", "accept_any_arguments": true}]'])
    return path


@pytest.mark.parametrize("into", ["../..", "../escaped", "/tmp/abs", "a/../../b"])
def test_import_csv_into_a_folder_outside_the_cases_is_refused(suite, tmp_path, into):
    path = _one_test_csv(tmp_path / "tests.csv")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    result = run_cli("import-csv", str(path), "--into", into, cwd=suite)
    assert result.returncode == 2, result.stderr
    assert f"--into: {into!r} leads outside the suite's cases/ folder" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("depth", [100, 50_000])  # deeper than YAML allows / than Python's stack
def test_import_csv_with_a_deeply_nested_cell_exits_2(suite, tmp_path, depth):
    path = _one_test_csv(tmp_path / "deep.csv", history="[" * depth + "]" * depth)
    result = run_cli("import-csv", str(path), cwd=suite)
    assert result.returncode == 2, result.stderr
    assert "deep.csv:row 2: conversation_history: nests too deeply" in result.stderr
    assert "Traceback" not in result.stderr


def test_k_beyond_the_bound_exits_2_before_anything_runs(suite):
    (suite / "cases" / "huge.yml").write_text("prompt: hi\nk: 1000000000\n")
    result = run_cli("list", cwd=suite)
    assert result.returncode == 2
    assert "cases/huge.yml:2: k: expected an integer from 1 to 100, got 1000000000" in result.stderr
    (suite / "cases" / "huge.yml").unlink()
    result = run_cli("test", "-k", "1000000000", cwd=suite)
    assert result.returncode == 2
    assert "-k: expected an integer from 1 to 100" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_console_script_ends_with_its_whole_output_and_its_exit_code(suite):
    """The console script ends its process without tearing the interpreter down: what it
    printed still reaches a pipe whole, last line included, and the exit code is the
    command's, for a listing of many tests and for a refusal alike."""
    from eval_pipeline_tests.cli.console import cli_env, run_cli_subprocess

    # Buffered, as on a user's machine: the end of the output waits in the buffer.
    env = {k: v for k, v in cli_env().items() if k != "PYTHONUNBUFFERED"}
    for i in range(400):
        (suite / "cases" / f"t{i:03d}.yml").write_text(
            f"prompt: Question {i}?\nsql: SELECT {i} AS answer\n", encoding="utf-8"
        )
    listed = run_cli_subprocess("list", cwd=suite, env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert sum(re.match(r"t\d{3} ", line) is not None for line in lines) == 400
    assert lines[-1] == f"402 test(s) in {suite / 'cases'}"
    refused = run_cli_subprocess("list", "-s", "nope", cwd=suite, env=env)
    assert refused.returncode == 2
    assert refused.stderr.endswith("--select: no test, file or folder named 'nope'\n")

"""What a person reads from `eval-pipeline test` and `diff`: progress in a CI log,
the report on a 100-column terminal, `--failures-only`, what changed when no run was made,
the results file's name, and `diff` with nothing to compare — through the real script.

The suite is `replay_suite.py`'s (replay models `good`, right on every test, and
`mixed`, wrong on `top_customer`) plus one test with a long name that `mixed` also gets wrong.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import (
    CASES,
    DAY,
    FAILED_BY_MIXED,
    REPLIES,
    WRONG_SQL,
    recording,
    rekey,
    write_suite,
)

pytestmark = pytest.mark.slow

LONG_NAME = "customers_who_spent_more_than_fifty_dollars_in_total"
LONG_SQL = "SELECT customer FROM orders GROUP BY customer HAVING SUM(amount) > 50 ORDER BY 1"
ALL_SQL = {**{name: sql for name, (_, sql) in CASES.items()}, LONG_NAME: LONG_SQL}
RUNS = len(ALL_SQL)
STYLE = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_suite(tmp_path_factory.mktemp("polish") / "suite")
    case = {"name": LONG_NAME, "prompt": "Who spent more than 50 dollars?", "sql": LONG_SQL}
    (root / "cases" / "long.yml").write_text(yaml.safe_dump(case, sort_keys=False))
    wrong = {FAILED_BY_MIXED, LONG_NAME}
    mixed = {n: (WRONG_SQL if n in wrong else sql) for n, sql in ALL_SQL.items()}
    (root / "recordings" / "good.jsonl").write_text(recording(ALL_SQL, REPLIES))
    (root / "recordings" / "mixed.jsonl").write_text(recording(mixed, {}))
    rekey(root, "good", "mixed")
    return root


def run_with(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env={**cli_env(), **env})


@pytest.fixture(scope="module")
def first(suite: Path) -> subprocess.CompletedProcess[str]:
    """Both models, output to a pipe (a CI log) that says it is 50 columns wide."""
    return run_with(
        {"COLUMNS": "50"},
        "test",
        "--date",
        DAY,
        "-m",
        "replay:good",
        "-m",
        "replay:mixed",
        cwd=suite,
    )


def test_progress_in_a_log_is_one_short_line_per_finished_run(first):
    assert first.returncode == 1, first.stderr  # mixed fails two tests
    lines = first.stderr.splitlines()  # progress is a diagnostic: stderr
    runs = [line for line in lines if line.startswith("[")]
    assert len(runs) == 2 * RUNS, first.stderr
    for line in runs:
        # Each run whole on its line, even past the 50 columns COLUMNS claims: a log has no width.
        assert re.fullmatch(r"\[\d+/10\] ran \w+ replay:(good|mixed)#0 \d+\.\ds", line), line
    assert any(LONG_NAME in line and len(line) > 50 for line in runs)
    assert sorted(int(line[1 : line.index("/")]) for line in runs) == list(range(1, 11))
    assert not any(line.startswith("  ") and "tok" in line for line in lines)  # no folded tail


def test_diff_without_results_for_the_day_or_model_says_which_exist(suite, first):
    day = run_cli("diff", "--date", "2020-01-01", cwd=suite)
    assert day.returncode == 2, day.stdout + day.stderr
    assert day.stdout == ""
    assert f"no results on 2020-01-01 (--date); days with results: {DAY}" in day.stderr
    no_traceback(day)

    model = run_cli("diff", "--date", DAY, "--model", "nope:x", cwd=suite)
    assert model.returncode == 2, model.stdout + model.stderr
    assert model.stdout == ""
    assert (
        f"no results for nope:x on {DAY}; models with results that day: replay:good, replay:mixed"
        in model.stderr
    )
    no_traceback(model)

    base = run_cli("diff", "--base", "2020-01-01", "--date", DAY, cwd=suite)
    assert base.returncode == 2 and "no results on 2020-01-01 (--base)" in base.stderr


def test_a_100_column_terminal_keeps_test_names_whole_and_failures_only_lists_failures(
    suite, first
):
    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0", "COLUMNS": "100", "NO_COLOR": "1"}
    result = run_with(
        terminal, "test", "--date", DAY, "-m", "replay:mixed", "--failures-only", "-q", cwd=suite
    )
    assert result.returncode == 1, result.stderr
    # A terminal still gets bold and dim; rich pads each line to the width.
    lines = [line.rstrip() for line in STYLE.sub("", result.stdout).splitlines()]
    # Every line fits, but the path of the results file: it is never folded (copy-paste).
    assert all(len(line) <= 100 for line in lines if "results written to" not in line), lines
    table = lines[lines.index("Results") : lines.index("Performance by Model")]
    failing = [line for line in table if "✗ fail" in line]
    # Only the two failures, each on one line: its name whole, the message cut, not folded.
    assert [line.split()[0] for line in failing] == [LONG_NAME, FAILED_BY_MIXED], table
    assert "row count differs: actual 1" in failing[0], table
    assert "column 'customer' differs at row" in failing[1], table
    assert len([line for line in table if line.strip()]) == 2 + 1 + 2 + 1  # title, head, rule
    assert f"{RUNS - 2} passing run(s) not shown (--failures-only)" in result.stdout
    assert f"{RUNS - 2}/{RUNS} passed" in result.stdout  # the summary still counts every run


def test_a_regrade_says_what_changed_and_the_results_file_names_the_day(suite, first):
    path = suite / "cases" / "total_revenue.yml"
    case = yaml.safe_load(path.read_text())
    case["sql"] = "SELECT SUM(amount) + 1 AS revenue FROM orders"  # a reference that now differs
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    result = run_cli("test", "--date", DAY, "-m", "replay:good", cwd=suite)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "regressed since the previous run of replay:good: total_revenue (reference SQL changed)"
        in result.stdout
    )
    assert (
        f"No agent run executed: all {RUNS} runs reused; verdicts changed by: reference SQL."
        in result.stdout
    )
    assert "nothing changed" not in result.stdout
    # The file is named by the evaluated day (not today), then the time: nao's results_*.json.
    written = re.search(r"^results written to (\S+)$", result.stdout, re.MULTILINE)
    assert written, result.stdout
    assert re.fullmatch(r"results_20260101_\d{6}\.json", Path(written.group(1)).name)


def test_sql_without_a_query_reads_statements_read_only_and_goes_on_after_an_error(suite, first):
    script = (
        "SELECT model, count(*) AS graded\n  FROM grades GROUP BY model ORDER BY model;\n"
        ".tables\nDROP VIEW grades;\nSELECT 'still here' AS after;\n"
    )
    result = subprocess.run(
        [str(SCRIPT), "sql", "--format", "csv"],
        input=script,
        cwd=suite,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr  # a piped script with a refused statement
    assert f"model,graded\nreplay:good,{RUNS}\nreplay:mixed,{RUNS}\n" in result.stdout
    assert "model_summaries\n" in result.stdout  # .tables
    assert "error: only queries run here (SELECT, DESCRIBE, SUMMARIZE…), not DROP" in result.stderr
    assert result.stdout.endswith("after\nstill here\n")
    no_traceback(result)


def test_sql_without_a_query_on_a_terminal_is_a_prompt_with_history(suite, first):
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(SCRIPT), "sql"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=suite,
        env={**cli_env(), "TERM": "dumb"},
    )
    os.close(follower)
    seen = b""

    def read_until(token: bytes) -> bytes:
        nonlocal seen
        deadline = time.monotonic() + 60
        while seen.count(token) < 1 and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                seen += os.read(leader, 65536)
        assert token in seen, seen.decode(errors="replace")
        found, seen = seen, b""
        return found

    try:
        read_until(b"results> ")
        os.write(leader, b"SELECT count(*) AS graded_runs\r")
        read_until(b"...> ")  # a statement goes on until its `;`
        os.write(leader, b"FROM grades;\r")
        shown = read_until(b"results> ")
        assert b"graded_runs" in shown and str(2 * RUNS).encode() in shown, shown
        os.write(leader, b".quit\r")
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    history = (suite / ".eval" / "logs" / "sql_history").read_text()
    assert "FROM grades;" in history  # arrow-up finds it in the next session

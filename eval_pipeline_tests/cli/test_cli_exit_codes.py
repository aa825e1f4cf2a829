"""`eval-pipeline` on bad commands, configs and broken machinery.

Every case ends in a message and an exit code a CI gate can read — 2 for a mistake in the
command, configuration or test files, 3 when the work could not run — never a traceback
and never 1, which means "tests failed". The cases stop before any agent is called, so
they need no model and (but for the full disk) no Dagster run.
"""

from __future__ import annotations

import csv
import resource
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from eval_pipeline_tests.cli.console import (
    no_traceback,
    run_cli,
    run_cli_subprocess,
)
from eval_pipeline_tests.cli.replay_suite import write_suite

# Every test runs the `eval-pipeline` command, some in a subprocess.
pytestmark = pytest.mark.slow

Setup = Callable[[Path], None]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("exit_codes") / "suite")


@pytest.fixture
def suite(template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "suite"))


def _config(suite: Path, text: str) -> None:
    (suite / "eval_config.yaml").write_text(text)


def _with_warehouse(extra: str) -> str:
    return f"test:\n  models: [replay:good]\n{extra}warehouse: {{type: duckdb, path: warehouse.duckdb}}\n"


def _csv(path: Path, history: str) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "conversation_history", "tool_calls"])
        writer.writerow(["lists tables", history, '[{"tool": "list_tables"}]'])


def _nothing(_: Path) -> None:
    pass


def _replace_warehouse(make: Callable[[Path], None]) -> Setup:
    def setup(suite: Path) -> None:
        (suite / "warehouse.duckdb").unlink()
        make(suite / "warehouse.duckdb")

    return setup


USAGE_CASES = {
    "day in the future": (
        ["test", "--date", "2099-01-01"],
        _nothing,
        "2099-01-01 is in the future; the last day that can be evaluated is today",
    ),
    "day before 2000": (
        ["test", "--date", "0001-01-01"],
        _nothing,
        "0001-01-01 is before 2000-01-01, the first day that can be evaluated",
    ),
    "test date not a date": (
        ["test", "--date", "notadate"],
        _nothing,
        "--date: expected YYYY-MM-DD, got 'notadate'",
    ),
    "diff date not a date": (
        ["diff", "--date", "notadate"],
        _nothing,
        "--date: expected YYYY-MM-DD, got 'notadate'",
    ),
    "export date not a date": (
        ["export", "--date", "notadate"],
        _nothing,
        "--date: expected YYYY-MM-DD, got 'notadate'",
    ),
    "export into a missing folder": (
        ["export", "-o", "/nonexistent/x"],
        _nothing,
        "-o: the folder /nonexistent does not exist",
    ),
    "test report into a missing folder": (
        ["test", "-o", "/nonexistent/x"],
        _nothing,
        "-o: the folder /nonexistent does not exist",
    ),
    "server port out of range": (
        ["server", "--port", "99999", "--no-open"],
        _nothing,
        "expected a port between 1 and 65535, got 99999",
    ),
    "import into an absolute folder": (
        ["import-csv", "tests.csv", "--into", "/abs"],
        lambda s: _csv(s / "tests.csv", '[{"role": "user", "content": "Hi?"}]'),
        "--into: '/abs' leads outside the suite's cases/ folder",
    ),
    "import into a folder outside the suite": (
        ["import-csv", "tests.csv", "--into", "../.."],
        lambda s: _csv(s / "tests.csv", '[{"role": "user", "content": "Hi?"}]'),
        "--into: '../..' leads outside the suite's cases/ folder",
    ),
    "import of a deeply nested JSON cell": (
        ["import-csv", "tests.csv"],
        lambda s: _csv(s / "tests.csv", "[" * 100_000),
        "tests.csv:row 2: conversation_history: nests too deeply",
    ),
    "bad cron": (
        ["test"],
        lambda s: _config(s, _with_warehouse('  schedule: "not a cron"\n')),
        "test.schedule: 'not a cron' is not a cron expression",
    ),
    "allow_errors not true or false": (
        ["test"],
        lambda s: _config(s, _with_warehouse("  allow_errors: sometimes\n")),
        "test.allow_errors: expected true or false, got 'sometimes'",
    ),
    "unknown judge model": (
        ["test"],
        lambda s: _config(s, _with_warehouse("  judge_model: nope:gpt\n")),
        "test.judge_model: 'nope:gpt': provider 'nope' is not under llm.providers",
    ),
    "state_dir is a file": (
        ["test"],
        lambda s: _config(s, _with_warehouse("") + "state_dir: eval_config.yaml\n"),
        "eval_config.yaml is a file; state_dir must be a folder",
    ),
    "binary context file": (
        ["test"],
        lambda s: _config(s, _with_warehouse("") + "context: [warehouse.duckdb]\n"),
        "context file 'warehouse.duckdb' is not UTF-8 text",
    ),
    "config not UTF-8": (
        ["list"],
        lambda s: (s / "eval_config.yaml").write_bytes(b"test:\n  models: [\xff\xfe]\n"),
        "eval_config.yaml: is not UTF-8 text",
    ),
    "config is a folder": (
        ["list"],
        lambda s: (s / "eval_config.yaml").unlink() or (s / "eval_config.yaml").mkdir(),
        "eval_config.yaml: ",
    ),
    "config nested deeply": (
        ["list"],
        lambda s: _config(s, "test: " + "[" * 20_000 + "\n"),
        "eval_config.yaml",
    ),
    "warehouse missing": (
        ["test"],
        _replace_warehouse(lambda path: None),
        "warehouse.path: ",
    ),
    "warehouse is a folder": (
        ["test"],
        _replace_warehouse(lambda path: path.mkdir()),
        "is a folder, not a DuckDB file",
    ),
    "warehouse is not DuckDB": (
        ["test"],
        _replace_warehouse(lambda path: path.write_text("order_id,amount\n1,2\n")),
        "is not a DuckDB database",
    ),
    "no model in the config": (
        ["test"],
        lambda s: _config(s, "test:\n  models: []\nwarehouse: {path: warehouse.duckdb}\n"),
        "no model to evaluate",
    ),
    "a blank model on the command line": (["test", "-m", " "], _nothing, "no model to evaluate"),
}


@pytest.mark.parametrize(("args", "setup", "expected"), USAGE_CASES.values(), ids=USAGE_CASES)
def test_a_mistake_in_command_or_config_exits_2_with_one_message(suite, args, setup, expected):
    setup(suite)
    result = run_cli(*args, cwd=suite)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    no_traceback(result)
    assert "passed" not in result.stdout  # nothing was evaluated, so nothing "passed"
    assert not (suite / "outputs").exists()


def test_a_damaged_duckdb_warehouse_exits_3_naming_it(suite):
    path = suite / "warehouse.duckdb"
    with path.open("r+b") as handle:  # keep DuckDB's header, overwrite the first block
        handle.seek(4096)
        handle.write(b"\xff" * 8192)
    result = run_cli("test", cwd=suite)
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"the warehouse {path} cannot be opened: " in result.stderr
    assert "Corrupt database file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    no_traceback(result)
    debug = run_cli("test", "--debug", cwd=suite)
    assert debug.returncode == 3 and "Traceback" in debug.stderr  # --debug adds the traceback


def test_a_results_file_held_read_write_elsewhere_never_stops_a_command(suite):
    """results.duckdb held read-write by a notebook (DuckDB then locks every other process
    out of it): `sql` reads the store's files, and an evaluation publishes a new file over
    the held one; neither waits nor warns."""
    database = suite / ".eval" / "results.duckdb"
    database.parent.mkdir(parents=True, exist_ok=True)
    holder = duckdb.connect(str(database))  # a notebook holding the store read-write
    # Subprocesses: DuckDB's lock keeps out other processes; this one would share the holder's.
    try:
        evaluated = run_cli_subprocess("test", "--date", "2026-01-01", "-q", cwd=suite)
        query = "SELECT count(*) AS n FROM grades"
        result = run_cli_subprocess("sql", query, "--format", "csv", cwd=suite)
    finally:
        holder.close()
    assert evaluated.returncode in (0, 1), evaluated.stdout + evaluated.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "n" and int(result.stdout.splitlines()[1]) > 0
    assert "held open" not in evaluated.stderr + result.stderr
    no_traceback(evaluated)
    no_traceback(result)
    with duckdb.connect(str(database), read_only=True) as published:
        assert published.execute("SELECT count(*) FROM grades").fetchone()[0] > 0


def test_a_full_disk_during_a_run_exits_3_naming_the_step(suite):
    """A full disk, simulated with a file-size limit (RLIMIT_FSIZE, as `ulimit -f`): writes past
    64 KB fail with EFBIG where a full disk gives ENOSPC, through the same calls."""
    limit = 64_000

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # A first evaluation with room: the instance, the store and the history project's dbt
    # manifest exist (as on any machine that has run before), so the disk fills during a run.
    assert run_cli("test", "--date", "2026-01-01", "-q", cwd=suite).returncode in (0, 1)
    # A subprocess: the limit is the process's own, and would outlive the call here.
    result = run_cli_subprocess(
        "test", "--date", "2026-01-02", "-q", cwd=suite, preexec_fn=small_disk
    )
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: eval-pipeline test could not run: ")
    # The stage that could not write, and the file (EFBIG here, ENOSPC on a full disk).
    assert "failed: " in lines[0] and "File too large" in lines[0]
    assert str(suite / ".eval") in lines[0]
    no_traceback(result)

"""An unchanged rerun answers from the store without starting Dagster, and any change ends that.

`eval-pipeline test` keeps, in the suite's Dagster home, what its last complete evaluation
saw: a digest of the inputs and the names of the day's files in the store. When both are the
same, evaluating again would run nothing and write nothing, so the command reads the results
from the store, prints the same report and writes the same results file, without importing
Dagster. Each change a user (or another writer) makes is checked to send the next command
through the pipeline again: a new evaluation recorded in the Dagster instance.

Every change is checked in-process, on the decision the command makes (`LastEvaluation`, for
the request the CLI builds), and a change of each kind through the CLI. One evaluated suite is
shared by the tests that need one: the changes are made to it in turn, each from a state where
the next command takes the shortcut (checked before each change); the options and the
selection come after them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path

import duckdb
import pytest
import yaml

from eval_pipeline.cli import build_parser
from eval_pipeline.cli._test_command import (  # the unit itself: the command's request, in-process
    _request,
)
from eval_pipeline.pipeline import EvaluationRequest, LastEvaluation, instance_home
from eval_pipeline.pipeline import _unchanged as unchanged  # the unit itself: its digest
from eval_pipeline.store import StateFolder, read_latest, write_rows
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, by_turn, error
from eval_pipeline_tests.agents.tiny_suite import prompt_of, write_suite
from eval_pipeline_tests.cli.console import (
    SCRIPT,
    cli_env,
    no_traceback,
    run_cli,
    stages_of,
    written_results,
)

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "local:a")
CASES = {"q0": "What is the revenue?", "q1": "How many orders were shipped?"}
SHORTCUT = "nothing changed since the last evaluation of 2026-03-02: 2 stored run(s) reused"


@pytest.fixture(scope="module")
def server():
    with ScriptedServer("openai", script=by_turn(answer("540 USD."))) as running:
        yield running


@pytest.fixture(scope="module")
def evaluated(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite after one evaluation, shared by the module's tests in their order."""
    root = write_suite(
        tmp_path_factory.mktemp("unchanged") / "suite",
        cases=CASES,
        dbt=False,
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
    )
    first = run_cli(*ARGS, cwd=root)
    no_traceback(first)
    assert first.returncode == 0, first.stdout + first.stderr
    return root


def _results(output: str) -> dict:
    document = json.loads(written_results(output).read_text())
    document.pop("timestamp")
    return document


def test_an_unchanged_rerun_reads_the_store_without_dagster_and_reports_the_same(evaluated):
    before = stages_of(evaluated)
    full = _results(run_cli(*ARGS, cwd=evaluated).stdout)  # whichever path: the reference
    again = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *ARGS],
        cwd=evaluated,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{SHORTCUT}, no Dagster run" in again.stdout
    assert "No agent run executed: all 2 runs reused" in again.stdout
    assert _results(again.stdout) == full
    assert len(stages_of(evaluated)) == len(before), (
        "the unchanged rerun recorded stages in Dagster"
    )
    imported = [line.split("|")[-1].strip() for line in again.stderr.splitlines()]
    assert "dagster" not in imported, "the unchanged rerun imported Dagster"


def _edit_rules(root: Path) -> None:
    with (root / "RULES.md").open("a", encoding="utf-8") as rules:
        rules.write("Refunds are subtracted from revenue.\n")


def _edit_config(root: Path) -> None:
    path = root / "eval_config.yaml"
    config = yaml.safe_load(path.read_text())
    config["test"]["comparison"] = {"decimals": 1}
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _rebuild_warehouse(root: Path) -> None:
    warehouse = next(root.glob("*.duckdb"))
    stat = warehouse.stat()
    os.utime(warehouse, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def _another_writer(root: Path, model: str = "local:a") -> None:
    # Another process (the UI, a schedule, another machine on a bucket) writes the day's
    # grades of a model again: the same rows, a new file.
    layout = StateFolder(root / ".eval")
    day = date.fromisoformat(DAY)
    rows = [
        {k: v for k, v in row.items() if k not in ("written_at", "materialization_id")}
        | {"model": model}
        for row in read_latest(layout, "grades", model="local:a", run_date=day)
    ]
    write_rows(layout, "grades", rows, model=model, run_date=day, materialization_id="other")


def _another_model(root: Path) -> None:
    # Another model's results of the day (local:a's grades, written as local:b's) make its
    # leaderboard and report out of date.
    _another_writer(root, model="local:b")


def _edit_tags(root: Path) -> None:
    # Tags decide no verdict, but the test_cases table (SQL, the viewer) shows them.
    path = root / "cases" / "q0.yml"
    case = yaml.safe_load(path.read_text())
    case["tags"] = ["revenue"]
    path.write_text(yaml.safe_dump(case, sort_keys=False))


WRITE_WITHOUT_CHECKPOINT = """
import os, sys, duckdb
connection = duckdb.connect(sys.argv[1])
connection.execute("SET checkpoint_threshold = '1GB'")
connection.execute("INSERT INTO orders SELECT * FROM orders LIMIT 1")
os._exit(0)  # a writer that died: the row is in the write-ahead log, the file unchanged
"""


def _write_ahead_log(root: Path) -> None:
    warehouse = next(root.glob("*.duckdb"))
    before = warehouse.stat()
    subprocess.run([sys.executable, "-c", WRITE_WITHOUT_CHECKPOINT, str(warehouse)], check=True)
    assert warehouse.with_name(warehouse.name + ".wal").exists()
    assert (warehouse.stat().st_size, warehouse.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )


def _wipe_instance(root: Path) -> None:
    shutil.rmtree(root / ".eval" / "dagster_home")


CHANGES: dict[str, Callable[[Path], None]] = {
    "a context file edited": _edit_rules,
    "a setting of the configuration": _edit_config,
    "the warehouse file rebuilt": _rebuild_warehouse,
    "another writer in the day's partitions": _another_writer,
    "another model's results of the day": _another_model,
    "a test's tags edited": _edit_tags,
    "rows in the warehouse's write-ahead log": _write_ahead_log,
    "the Dagster instance wiped": _wipe_instance,
}


# One change of each kind made through the CLI: an input the agent reads, a store file, a
# file DuckDB itself leaves changed (its write-ahead log, replayed by the next reader), the
# instance. Every change is also checked in-process, on the decision the CLI makes.
THROUGH_THE_CLI = (
    "a context file edited",
    "another writer in the day's partitions",
    "rows in the warehouse's write-ahead log",
    "the Dagster instance wiped",
)


def _decision(root: Path, *options: str) -> int | None:
    """What `eval-pipeline test ARGS options` decides in `root`, in-process, as the command
    does: the stored runs an unchanged rerun reuses, or None (it runs the pipeline)."""
    suite = load_suite(root)
    request = _request(suite, build_parser().parse_args([*ARGS, *options]))
    return LastEvaluation(suite, request, instance_home(suite.config)).reused()


def _record_evaluation(root: Path) -> None:
    """What a complete evaluation of ARGS records at its end: the inputs it saw (`capture`,
    once the warehouse is built) and the store's files of the day (`save`)."""
    suite = load_suite(root)
    home = instance_home(suite.config)
    home.mkdir(parents=True, exist_ok=True)  # a wiped instance: the evaluation makes it anew
    last = LastEvaluation(suite, _request(suite, build_parser().parse_args(ARGS)), home)
    last.capture()
    last.save()


def test_any_change_ends_the_shortcut_until_an_evaluation_records_it(
    evaluated: Path, tmp_path: Path
):
    """Each change in turn, in-process, on a copy of the evaluated suite recorded as
    evaluated where it lives: after it, the command's decision is to run the pipeline; once an
    evaluation records what it saw, the decision is the shortcut again."""
    suite = shutil.copytree(evaluated, tmp_path / "suite")
    _record_evaluation(suite)
    assert _decision(suite) == 2, "the recorded copy does not take the shortcut"
    for change, make in CHANGES.items():
        make(suite)
        assert _decision(suite) is None, f"{change}: the shortcut was still taken"
        _record_evaluation(suite)
        assert _decision(suite) == 2, f"{change}: no shortcut once recorded"


def test_a_change_of_each_kind_sends_the_next_command_through_the_pipeline(evaluated: Path):
    """Each change in turn, made where the next command would take the shortcut: the command
    after it runs the pipeline, and the one after that takes the shortcut again."""
    suite = evaluated
    assert SHORTCUT in run_cli(*ARGS, cwd=suite).stdout, "the suite starts evaluated"
    for change in THROUGH_THE_CLI:
        CHANGES[change](suite)
        before = len(stages_of(suite))
        after = run_cli(*ARGS, cwd=suite)
        no_traceback(after)
        assert after.returncode == 0, f"{change}: {after.stdout}{after.stderr}"
        assert SHORTCUT not in after.stdout, f"{change}: the shortcut was taken"
        stages = [kind for kind, _ in stages_of(suite)[before:]]
        assert stages, f"{change}: nothing recorded in Dagster"
        if change == "a context file edited":  # the agent reads it: both tests run again
            executed = json.loads(written_results(after.stdout).read_text())["executed_runs"]
            assert executed == 2, f"{change}: {executed} run(s) executed"
        # and once through, the next command takes the shortcut again
        again = run_cli(*ARGS, cwd=suite)
        assert SHORTCUT in again.stdout, f"{change}: no shortcut after it\n{again.stdout}"


OPTIONS = (["--no-cache"], ["--rejudge"], ["-k", "2"], ["--date", "2026-03-03"])


def test_options_that_ask_for_something_new_always_run(evaluated: Path):
    """From a suite where the plain command takes the shortcut, each option's decision is to
    run (in-process, as the command decides), and through the CLI `--no-cache` does run (it
    records nothing, so an option after it would run whatever it decided)."""
    suite = evaluated
    assert _decision(suite) == 2, "without an option: the shortcut"
    for options in OPTIONS:
        assert _decision(suite, *options) is None, options
    assert SHORTCUT in run_cli(*ARGS, cwd=suite).stdout, "without an option: the shortcut"
    done = run_cli(*ARGS, "--no-cache", cwd=suite)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing changed since" not in done.stdout
    assert json.loads(written_results(done.stdout).read_text())["executed_runs"] == 2


def test_a_run_in_error_is_retried_even_when_nothing_changed(
    server: ScriptedServer, tmp_path: Path
):
    """A partition whose last runs hold an error is never skipped: the error is retried by
    the next command, and once the provider answers, the retried run is graded."""
    root = write_suite(
        tmp_path / "suite",
        cases={"q0": "What is the revenue?"},
        dbt=False,
        providers=[{"provider": "down", "base_url": "http://127.0.0.1:9/v1", "timeout_s": 1}],
    )
    args = ("test", "--date", DAY, "-m", "down:x", "--format", "json", "-q")
    for _ in range(2):
        failed = run_cli(*args, cwd=root)
        assert failed.returncode == 3, failed.stderr  # an error run, not a wrong answer
        document = json.loads(failed.stdout)
        assert document["results"][0]["status"] == "error"
        assert document["executed_runs"] == 1, "the run in error was not retried"
    config = yaml.safe_load((root / "eval_config.yaml").read_text())
    config["llm"]["providers"][0]["base_url"] = server.base_url
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    retried = run_cli(*args, cwd=root)
    assert retried.returncode == 0, retried.stderr
    document = json.loads(retried.stdout)
    assert document["executed_runs"] == 1
    assert document["results"][0]["status"] != "error"


def test_a_warehouse_file_answers_from_itself_alone(server: ScriptedServer, tmp_path: Path):
    """The shortcut takes an unchanged warehouse file (size, modification time) for unchanged
    data. That holds because a reference cannot read outside the file: a view over a Parquet
    file beside it fails in the sandbox, so the file's data changing cannot go unnoticed."""
    archive = tmp_path / "archive.parquet"
    with duckdb.connect() as connection:
        connection.execute(f"COPY (SELECT * FROM range(3)) TO '{archive}'")
    root = write_suite(
        tmp_path / "suite",
        cases={
            "archived": {
                "prompt": "How many orders are archived?",
                "sql": "SELECT count(*) AS archived FROM archived_orders",
            }
        },
        dbt=False,
        providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
    )
    with duckdb.connect(str(root / "warehouse.duckdb")) as connection:
        connection.execute(f"CREATE VIEW archived_orders AS SELECT * FROM '{archive}'")
    done = run_cli("test", "--date", DAY, "-m", "local:a", "--format", "json", "-q", cwd=root)
    assert done.returncode == 3, done.stderr  # no reference: an error run, not a wrong answer
    [reference] = read_latest(
        StateFolder(root / ".eval"), "reference_results", run_date=date.fromisoformat(DAY)
    )
    assert "file system operations are disabled" in reference["error"]
    assert str(archive) in reference["error"]


# The clock in a form the old list missed, and randomness; every other function the engine
# does not declare consistent is covered by grading/test_reference_health.py.
VARYING = {
    "the clock": "SELECT current_localtime() AS now",
    "randomness": "SELECT random() < 2 AS always",
}


def test_a_reference_that_may_answer_otherwise_always_runs(server: ScriptedServer, tmp_path: Path):
    """A function DuckDB does not declare consistent (the clock, in the database's time zone,
    which may move within a UTC day; randomness) may give another answer at the next run, so
    a suite with such a reference runs its references every time.

    Each function leaves the suite without the digest an unchanged rerun is matched on (the
    same suite with a consistent reference has one); with the clock, through the CLI, no
    command takes the shortcut."""

    def suite_of(name: str, sql: str) -> Path:
        return write_suite(
            tmp_path / name,
            cases={"varies": {"prompt": "What day is it?", "sql": sql}},
            dbt=False,
            providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
        )

    request = EvaluationRequest(models=("local:a",), run_date=date.fromisoformat(DAY))
    home = tmp_path / "dagster_home"
    steady = load_suite(suite_of("steady", "SELECT 1 AS one"))
    assert unchanged._inputs(steady, request, home) is not None
    for what, sql in VARYING.items():
        suite = load_suite(suite_of(what.replace(" ", "_"), sql))
        assert unchanged._inputs(suite, request, home) is None, f"{what}: an unchanged rerun"

    root = suite_of("through_the_cli", VARYING["the clock"])
    for _ in range(2):
        done = run_cli(*ARGS, cwd=root)
        assert done.returncode in (0, 1), done.stderr
        assert "nothing changed since" not in done.stdout


def test_a_selection_takes_the_shortcut_and_counts_its_own_runs(evaluated: Path):
    suite = evaluated
    args = (*ARGS, "--select", "q0", "--format", "json")
    through = json.loads(run_cli(*args, cwd=suite).stdout)  # the others are carried over
    again = run_cli(*args, cwd=suite)
    shortcut = json.loads(again.stdout)
    assert "nothing changed since the last evaluation of 2026-03-02: 1 stored run(s)" in (
        again.stderr
    )
    assert (shortcut["executed_runs"], shortcut["reused_runs"]) == (0, 1)
    assert (through["executed_runs"], through["reused_runs"]) == (0, 1)
    assert [r["name"] for r in shortcut["results"]] == ["q0"]


def test_a_selection_is_decided_by_its_own_runs_whatever_the_others_are(tmp_path: Path):
    """Iterating on one test while another ends in error: each rerun of the selection is
    answered from the store, as its own runs are all graded."""

    def script(request, index):
        if prompt_of(request) == CASES["q1"]:
            return error(400, "this test's question is refused")  # an error run, not retried
        return answer("540 USD.")

    with ScriptedServer("openai", script=script) as server:
        root = write_suite(
            tmp_path / "suite",
            cases=CASES,
            dbt=False,
            providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
        )
        whole = run_cli(*ARGS, cwd=root)
        assert whole.returncode == 3, whole.stdout + whole.stderr  # q1 is an error run
        args = (*ARGS, "--select", "q0")
        run_cli(*args, cwd=root)
        before = len(stages_of(root))
        again = run_cli(*args, cwd=root)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing changed since the last evaluation of 2026-03-02: 1 stored run(s)" in (
        again.stdout
    )
    assert len(stages_of(root)) == before, "the selection's unchanged rerun recorded stages"

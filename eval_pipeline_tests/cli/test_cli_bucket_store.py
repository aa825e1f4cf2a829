"""`store: {url: s3://…, endpoint_url: …}`: an evaluation through the CLI with every table in a
bucket (moto_server as S3), read back by `eval-pipeline sql`, reused, compacted and checked."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import s3fs

from eval_pipeline.store import StateFolder, compact_store, fetch_read_only, write_rows
from eval_pipeline.suite import SuiteError, load_config
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, repeat
from eval_pipeline_tests.agents.tiny_suite import write_suite as write_agent_suite
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback, run_cli, sql_rows
from eval_pipeline_tests.cli.replay_suite import (
    FIRST_MODELS_ARGS,
    GRADES_SQL,
    VERDICTS,
    set_store,
    write_suite,
)
from eval_pipeline_tests.store.buckets import AWS_ENV, Bucket, moto_process

pytestmark = pytest.mark.slow

DAY = "2026-04-01"


def read_rows(root: Path, query: str) -> list[list[str]]:
    """`sql_rows` in this process: the read `eval-pipeline sql` makes (`fetch_read_only` on the
    suite's store), each value as its CSV shows it. A CLI run costs seconds of start-up."""
    _, rows = fetch_read_only(StateFolder.of(load_config(root)), query)
    return [[str(value) for value in row] for row in rows]


@pytest.fixture(scope="module")
def evaluated(
    stopping_buckets, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Bucket, object]]:
    """A suite whose store is a bucket, evaluated once for two models through the CLI (while
    the commands of `stopping_buckets` wait on their silent buckets: started first)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        bucket = Bucket(s3_endpoint, f"eval-{uuid.uuid4().hex[:12]}")
        s3fs.S3FileSystem(endpoint_url=s3_endpoint).mkdir(bucket.name)
        root = write_suite(tmp_path_factory.mktemp("bucket") / "suite")
        set_store(root, bucket.store_config)
        result = run_cli("test", "--date", DAY, *FIRST_MODELS_ARGS, cwd=root)
        yield root, bucket, result


def test_an_evaluation_with_the_store_in_a_bucket_keeps_every_table_there(evaluated):
    root, bucket, result = evaluated
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 agent run(s) executed, 0 reused." in result.stdout
    assert sql_rows(root, GRADES_SQL) == VERDICTS  # `eval-pipeline sql` reads the bucket
    assert read_rows(root, "SELECT model, passed, total FROM model_summaries ORDER BY model") == [
        ["replay:drift", "4", "4"],
        ["replay:good", "4", "4"],
    ]
    keys = bucket.object_keys()
    for table in ("test_cases", "reference_results", "agent_runs", "tool_calls", "grades"):
        assert [k for k in keys if k.startswith(f"store/{table}/") and "_schema" not in k], table
    assert [k for k in keys if k.startswith("store/agent_runs/date=2026-04-01/model=replay%3A")]
    # The machine keeps only its own things: results.duckdb, caches, logs, the Dagster instance.
    state = root / ".eval"
    assert not (state / "store").exists() and not (state / "journal").exists()
    assert not list(state.rglob("*.parquet"))


def test_the_local_results_file_answers_in_a_bare_duckdb_with_no_s3_access(evaluated, tmp_path):
    """results.duckdb holds the bucket's tables as of the evaluation: a DuckDB session with no
    filesystem, no credentials and no httpfs reads the same grades as `eval-pipeline sql`."""
    root, _, _ = evaluated
    code = (
        f"import duckdb; c = duckdb.connect({str(root / '.eval' / 'results.duckdb')!r}, "
        f"read_only=True); print(c.execute({GRADES_SQL!r}).fetchall())"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repr([tuple(row) for row in VERDICTS])


def test_an_unchanged_rerun_reuses_the_runs_it_finds_in_the_bucket(evaluated):
    root, _, _ = evaluated
    result = run_cli("test", "--date", DAY, "-m", "replay:good", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No agent run executed: all 4 runs reused" in result.stdout


def test_compaction_over_the_bucket_keeps_every_answer_and_sql_reads_the_segments(evaluated):
    root, bucket, _ = evaluated
    layout = StateFolder.of(load_config(root))
    before = read_rows(root, GRADES_SQL)
    report = compact_store(layout, before=datetime.now(UTC) + timedelta(seconds=1))
    assert report.status == "compacted", report.message
    assert report.tables["grades"].current_rows == 8
    keys = bucket.object_keys()
    assert [k for k in keys if k.startswith("store/_segments/grades/")]
    assert sql_rows(root, GRADES_SQL) == before == VERDICTS  # `eval-pipeline sql` on segments
    # The first generation deletes nothing: another machine's views may read the files still.
    assert report.deleted == 0
    assert [k for k in keys if k.startswith("store/grades/date=")]
    # A new write shows on top of the segments; the next generation deletes the folded files.
    # The write is the one an evaluation makes of a partition's grades (`write_rows`, as
    # pipeline/_grades.py does): replay:good's four grades written again, as a --no-cache
    # rerun would (the reruns through the CLI are the test above and the fixture's).
    columns, rows = fetch_read_only(
        layout,
        "SELECT * EXCLUDE (written_at, materialization_id) FROM grades WHERE model = 'replay:good'",
    )
    written = [dict(zip(columns, row, strict=True)) for row in rows]
    assert len(written) == 4
    write_rows(layout, "grades", written, model="replay:good", run_date=written[0]["run_date"])
    second = compact_store(layout, before=datetime.now(UTC) + timedelta(seconds=1))
    assert second.status == "compacted" and second.deleted > 0
    assert read_rows(root, GRADES_SQL) == VERDICTS
    # Each write of a partition stays in the history: the first evaluation's 8 grades and the
    # rewrite's 4 (the unchanged rerun before it started no run, so wrote nothing).
    assert read_rows(root, "SELECT count(*) FROM grades_history") == [["12"]]


def test_store_check_reads_the_bucket(evaluated):
    root, _, _ = evaluated
    result = run_cli("store", "check", cwd=root)
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_credential_reaches_the_bucket_or_the_local_state(evaluated):
    root, bucket, _ = evaluated
    secret = AWS_ENV["AWS_SECRET_ACCESS_KEY"].encode()
    key_id = AWS_ENV["AWS_ACCESS_KEY_ID"].encode()
    for key in bucket.object_keys():
        data = bucket.read(key)
        assert secret not in data and key_id not in data, key
    for path in (root / ".eval").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret not in data and key_id not in data, path


BAD_STORES = [
    ({"url": "/tmp/results"}, "store.url: expected s3://<bucket>/<prefix>"),
    (
        {"url": "s3://AKIA1:hunter2@bucket/x"},
        "store.url: must be s3://<bucket>/<prefix> alone; credentials come from the AWS_*",
    ),
    (
        {"url": "s3://bucket/x", "endpoint_url": "127.0.0.1:9000"},
        "store.endpoint_url: expected an http(s):// URL",
    ),
    ({"url": "s3://bucket/x", "region": "eu"}, "store.region: unknown key"),
]


def test_a_bad_store_block_exits_2_naming_the_field(tmp_path):
    """Each bad block is a configuration problem naming its field (checked where the CLI
    gets it, `load_config`'s SuiteError, whose text it prints as `error: …` with exit 2);
    one of them through the CLI, end to end, the key in it shown nowhere."""
    root = write_suite(tmp_path / "suite")
    for store, expected in BAD_STORES:
        set_store(root, store)
        with pytest.raises(SuiteError) as raised:
            load_config(root)
        said = raised.value.render()
        assert expected in said, (store, said)
        assert "hunter2" not in said, store
    set_store(root, BAD_STORES[1][0])
    result = run_cli("sql", "SELECT 1", cwd=root)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert BAD_STORES[1][1] in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


@dataclass(frozen=True)
class Ended:
    """A command whose bucket stopped answering: how it ended, and when."""

    returncode: int
    stdout: str
    stderr: str
    endpoint: str
    #: Seconds from the store's stop (or the command's start, when stopped before) to its
    #: end; None if the store was never stopped.
    took: float | None


@pytest.fixture(scope="module")
def stopping_buckets(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[], dict[str, Ended]]]:
    """Two commands whose bucket (a moto_server of its own, `kill -STOP`ped: its socket
    accepts, nothing answers) stops answering: "before", stopped before `eval-pipeline test`
    starts; "mid-run", stopped once a few agent runs have begun. Both run at once: each
    waits on the bucket's timeouts, not on the CPU, so their waits overlap, and they start
    with the module (`evaluated` asks for them first), so those waits overlap its evaluation
    and the tests on it too. Yields the function that waits for both and tells how they ended.
    The servers stay stopped until the module ends, then are woken and stopped."""
    folder = tmp_path_factory.mktemp("stopped")
    with contextlib.ExitStack() as stack:
        # The children get the AWS_* environment from here; this process (the buckets' mkdir)
        # keeps it until the module ends, like `evaluated`, whose patch nests inside this one.
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        # Reads the commands' output as they run; shut down last, once they are ended (killed
        # by the stack if still running: a module whose tests never asked how they ended).
        pool = stack.enter_context(ThreadPoolExecutor(2))
        servers = {}
        for case in ("before", "mid-run"):
            endpoint, pid = stack.enter_context(moto_process())
            stack.callback(os.kill, pid, signal.SIGCONT)  # after the commands end
            bucket = Bucket(endpoint, f"eval-{uuid.uuid4().hex[:12]}")
            s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket.name)
            servers[case] = (bucket, pid)

        bucket, pid = servers["before"]
        root = write_suite(folder / "before")
        set_store(root, bucket.store_config)
        os.kill(pid, signal.SIGSTOP)
        before = start_cli(["test", "--date", DAY, *FIRST_MODELS_ARGS], root, stack)
        stopped_at = {"before": time.monotonic()}

        bucket, pid = servers["mid-run"]
        llm = stack.enter_context(
            ScriptedServer("openai", script=repeat(answer("Hello.", delay_s=0.5)))
        )
        cases = {f"q{i:02d}": f"Question {i}?" for i in range(30)}
        providers = [{"provider": "openai", "base_url": llm.base_url, "api_key": "k"}]
        root = write_agent_suite(
            folder / "mid-run", cases=cases, providers=providers, threads=1, dbt=False
        )
        set_store(root, bucket.store_config)
        mid_run = start_cli(["test", "--date", DAY], root, stack)

        def freeze_after_a_few_runs() -> None:
            while mid_run.poll() is None:
                if len(llm.requests) >= 3:
                    os.kill(pid, signal.SIGSTOP)  # the store goes silent mid-run
                    stopped_at["mid-run"] = time.monotonic()
                    return
                time.sleep(0.1)

        watcher = threading.Thread(target=freeze_after_a_few_runs, daemon=True)
        watcher.start()
        waits = {
            case: pool.submit(ended_at, child, timeout)
            for case, child, timeout in (("before", before, 180), ("mid-run", mid_run, 600))
        }

        @functools.cache
        def ended() -> dict[str, Ended]:
            done = {case: wait.result() for case, wait in waits.items()}
            watcher.join()
            return {
                case: Ended(
                    returncode=returncode,
                    stdout=stdout,
                    stderr=stderr,
                    endpoint=servers[case][0].endpoint_url,
                    took=end - stopped_at[case] if case in stopped_at else None,
                )
                for case, (returncode, stdout, stderr, end) in done.items()
            }

        yield ended


@pytest.fixture(scope="module")
def stopped_buckets(stopping_buckets: Callable[[], dict[str, Ended]]) -> dict[str, Ended]:
    """How the two commands of `stopping_buckets` ended."""
    return stopping_buckets()


def start_cli(args: list[str], root: Path, stack: contextlib.ExitStack) -> subprocess.Popen[str]:
    """`eval-pipeline ARGS` started in `root`, killed when `stack` closes if still running."""
    child = subprocess.Popen(
        [str(SCRIPT), *args],
        cwd=root,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stack.callback(child.kill)
    return child


def ended_at(child: subprocess.Popen[str], timeout: float) -> tuple[int, str, str, float]:
    """The command's exit code, stdout and stderr, and the moment it ended (killed, and so
    failing its test, past `timeout`)."""
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
    return child.returncode, stdout, stderr, time.monotonic()


def test_a_bucket_that_stops_answering_ends_the_command_with_one_line_and_exit_3(
    stopped_buckets,
):
    ended = stopped_buckets["before"]
    assert "Traceback" not in ended.stderr + ended.stdout, ended.stderr
    assert ended.returncode == 3, ended.stdout + ended.stderr
    said = [line for line in ended.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "could not run" in said[0], ended.stderr
    assert ended.endpoint.split("//")[1] in said[0] or "bucket" in said[0], said
    # A few requests, each given up after its read timeout and a second attempt (67 s here;
    # botocore's defaults, 60 s and s3fs's 5 tries of 5 attempts, kept it for many minutes).
    assert ended.took < 100, f"the command took {ended.took:.0f} s"


def test_a_bucket_that_stops_answering_mid_run_ends_the_command_too(stopped_buckets):
    ended = stopped_buckets["mid-run"]
    assert ended.took is not None, ("the store was never stopped", ended.stdout, ended.stderr)
    assert ended.returncode == 3, ended.stdout + ended.stderr
    said = [line for line in ended.stderr.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "could not run" in said[0], ended.stderr
    assert ended.took < 150, f"ended {ended.took:.0f} s after the store stopped"

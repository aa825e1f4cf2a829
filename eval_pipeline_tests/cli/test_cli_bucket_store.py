"""`store: {url: s3://…, endpoint_url: …}`: an evaluation through the CLI with every table in a
bucket (moto_server as S3), read back by `eval-pipeline sql`, reused, compacted and checked."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import s3fs
import yaml

from eval_pipeline.store import StoreLayout, compact_store
from eval_pipeline.suite import load_config
from eval_pipeline_tests.cli.test_cli_test_command import (
    FIRST_MODELS_ARGS,
    no_traceback,
    run_cli,
    write_suite,
)
from eval_pipeline_tests.store.buckets import AWS_ENV, Bucket

pytestmark = pytest.mark.slow

DAY = "2026-04-01"
VERDICTS = [
    ["replay:drift", "customer_count", "passed"],
    ["replay:drift", "order_count", "passed"],
    ["replay:drift", "top_customer", "passed"],
    ["replay:drift", "total_revenue", "passed"],
    ["replay:good", "customer_count", "passed"],
    ["replay:good", "order_count", "passed"],
    ["replay:good", "top_customer", "passed"],
    ["replay:good", "total_revenue", "passed"],
]
GRADES_SQL = "SELECT model, name, status FROM grades ORDER BY model, name"


def set_store(root: Path, store: dict | None) -> None:
    config = yaml.safe_load((root / "eval_config.yaml").read_text())
    config["store"] = store
    if store is None:
        del config["store"]
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def sql_rows(root: Path, query: str) -> list[list[str]]:
    result = run_cli("sql", query, "--format", "csv", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    return list(csv.reader(io.StringIO(result.stdout)))[1:]


@pytest.fixture(scope="module")
def evaluated(
    s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Bucket, object]]:
    """A suite whose store is a bucket, evaluated once for two models through the CLI."""
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
    assert sql_rows(root, GRADES_SQL) == VERDICTS
    assert sql_rows(root, "SELECT model, passed, total FROM model_summaries ORDER BY model") == [
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
    layout = StoreLayout.of(load_config(root))
    before = sql_rows(root, GRADES_SQL)
    report = compact_store(layout, before=datetime.now(UTC) + timedelta(seconds=1))
    assert report.status == "compacted", report.message
    assert report.tables["grades"].current_rows == 8
    keys = bucket.object_keys()
    assert [k for k in keys if k.startswith("store/_segments/grades/")]
    assert sql_rows(root, GRADES_SQL) == before == VERDICTS
    # The first generation deletes nothing: another machine's views may read the files still.
    assert report.deleted == 0
    assert [k for k in keys if k.startswith("store/grades/date=")]
    # A new write shows on top of the segments; the next generation deletes the folded files.
    assert (
        run_cli("test", "--date", DAY, "-m", "replay:good", "--no-cache", cwd=root).returncode == 0
    )
    second = compact_store(layout, before=datetime.now(UTC) + timedelta(seconds=1))
    assert second.status == "compacted" and second.deleted > 0
    assert sql_rows(root, GRADES_SQL) == VERDICTS
    # Each write of a partition stays in the history: the first evaluation's 8 grades and the
    # --no-cache rerun's 4 (the unchanged rerun before it started no run, so wrote nothing).
    assert sql_rows(root, "SELECT count(*) FROM grades_history") == [["12"]]


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


@pytest.mark.parametrize(
    ("store", "expected"),
    [
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
    ],
)
def test_a_bad_store_block_exits_2_naming_the_field(tmp_path, store, expected):
    root = write_suite(tmp_path / "suite")
    set_store(root, store)
    result = run_cli("sql", "SELECT 1", cwd=root)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert "hunter2" not in result.stdout + result.stderr


def test_a_bucket_that_stops_answering_ends_the_command_with_one_line_and_exit_3(tmp_path):
    import os
    import signal
    import time

    from eval_pipeline_tests.store.buckets import moto_process

    with pytest.MonkeyPatch.context() as patch, moto_process() as (endpoint, pid):
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        bucket = Bucket(endpoint, f"eval-{uuid.uuid4().hex[:12]}")
        s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket.name)
        root = write_suite(tmp_path / "suite")
        set_store(root, bucket.store_config)
        os.kill(pid, signal.SIGSTOP)  # its socket accepts; nothing answers
        try:
            started = time.monotonic()
            result = run_cli("test", "--date", DAY, *FIRST_MODELS_ARGS, cwd=root)
            took = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
    no_traceback(result)
    assert result.returncode == 3, result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "could not run" in said[0], result.stderr
    assert endpoint.split("//")[1] in said[0] or "bucket" in said[0], said
    # A few requests, each given up after its read timeout and a second attempt (67 s here;
    # botocore's defaults, 60 s and s3fs's 5 tries of 5 attempts, kept it for many minutes).
    assert took < 100, f"the command took {took:.0f} s"


def test_a_bucket_that_stops_answering_mid_run_ends_the_command_too(tmp_path):
    import os
    import signal
    import subprocess
    import threading
    import time

    from eval_pipeline_tests.agents.servers import ScriptedServer, answer, repeat
    from eval_pipeline_tests.agents.tiny_suite import write_suite as write_agent_suite
    from eval_pipeline_tests.cli.test_cli_test_command import SCRIPT, cli_env
    from eval_pipeline_tests.store.buckets import moto_process

    with (
        pytest.MonkeyPatch.context() as patch,
        moto_process() as (endpoint, pid),
        ScriptedServer("openai", script=repeat(answer("Hello.", delay_s=0.5))) as llm,
    ):
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        bucket = Bucket(endpoint, f"eval-{uuid.uuid4().hex[:12]}")
        s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket.name)
        cases = {f"q{i:02d}": f"Question {i}?" for i in range(30)}
        providers = [{"provider": "openai", "base_url": llm.base_url, "api_key": "k"}]
        root = write_agent_suite(
            tmp_path / "suite", cases=cases, providers=providers, threads=1, dbt=False
        )
        set_store(root, bucket.store_config)
        child = subprocess.Popen(
            [str(SCRIPT), "test", "--date", DAY],
            cwd=root,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        frozen_at: list[float] = []

        def freeze_after_a_few_runs() -> None:
            while child.poll() is None:
                if len(llm.requests) >= 3:
                    os.kill(pid, signal.SIGSTOP)  # the store goes silent mid-run
                    frozen_at.append(time.monotonic())
                    return
                time.sleep(0.1)

        watcher = threading.Thread(target=freeze_after_a_few_runs, daemon=True)
        watcher.start()
        try:
            stdout, stderr = child.communicate(timeout=600)
            ended = time.monotonic()
        finally:
            os.kill(pid, signal.SIGCONT)
    assert frozen_at, ("the store was never stopped", stdout, stderr)
    assert child.returncode == 3, stdout + stderr
    said = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "could not run" in said[0], stderr
    assert ended - frozen_at[0] < 150, f"ended {ended - frozen_at[0]:.0f} s after the store stopped"

"""The same separate-process partitions with the store in a bucket (moto_server as S3): parallel
writers beside a SQL reader, and a worker killed mid-partition that a re-execution completes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from eval_pipeline.store import read_journals
from eval_pipeline_tests.pipeline.processes import (
    MATERIALIZE,
    READ_BUCKET_IN_A_LOOP,
    count,
    finish,
    rerun_completes_only_the_missing_runs,
    start,
)
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    SmallSuite,
    prepare,
)
from eval_pipeline_tests.store.buckets import Bucket

pytestmark = pytest.mark.slow


@pytest.fixture
def bucket_suite(small_suite: SmallSuite, bucket: Bucket) -> SmallSuite:
    small_suite.config["store"] = bucket.store_config
    small_suite.write_config()
    return small_suite


def test_two_models_in_parallel_processes_write_to_the_bucket_beside_a_reader(
    bucket_suite, bucket, tmp_path, instance
):
    prepare(bucket_suite, instance)
    bucket_suite.agent.latency_s = 0.05
    stop = tmp_path / "stop"
    reader = start(
        READ_BUCKET_IN_A_LOOP, str(bucket_suite.root), str(stop), log=tmp_path / "reader.log"
    )
    writers = [
        start(MATERIALIZE, str(bucket_suite.root), model, DAY, log=tmp_path / f"writer-{i}.log")
        for i, model in enumerate(MODELS)
    ]
    outcomes = [finish(w, tmp_path / f"writer-{i}.log", timeout=300) for i, w in enumerate(writers)]
    stop.touch()
    reading = finish(reader, tmp_path / "reader.log", timeout=300)

    assert outcomes == [{"success": True, "executed": 4, "reused": 0}] * 2
    assert reading["reads"] > 0 and reading["partial"] == []
    assert count(bucket_suite, "agent_runs") == 8
    assert count(bucket_suite, "grades") == 8
    assert count(bucket_suite, "model_summaries") == 2
    # Every table is in the bucket; the suite's folder holds no table file.
    keys = bucket.object_keys()
    for table in ("test_cases", "reference_results", "agent_runs", "tool_calls", "grades"):
        assert any(k.startswith(f"store/{table}/") and "/_schema" not in k for k in keys), table
    assert not (bucket_suite.root / ".eval" / "store").exists()
    assert not (bucket_suite.root / ".eval" / "journal").exists()


def test_a_worker_killed_mid_partition_leaves_only_its_journal_and_a_rerun_completes_it(
    bucket_suite, bucket, tmp_path, instance
):
    bucket_suite.write_config(threads=1)
    bucket_suite.agent.latency_s = 0.3
    defs = prepare(bucket_suite, instance)
    journals = bucket_suite.layout.journal_dir / "agent_runs" / f"date={DAY}"
    log = tmp_path / "killed.log"
    process = start(MATERIALIZE, str(bucket_suite.root), MODELS[0], DAY, log=log)

    def journaled() -> list[dict]:
        return (
            read_journals(
                j
                for model in journals.iterdir()
                for j in model.iterdir()
                if j.name.endswith(".jsonl")
            )
            if journals.exists()
            else []
        )

    deadline = time.monotonic() + 120
    while len(journaled()) < 2:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no run was journaled"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    survived = journaled()
    assert 2 <= len(survived) < 4
    # Nothing half-visible: the partition has no rows yet, and no object is a fragment.
    assert count(bucket_suite, "agent_runs") == 0
    assert not [k for k in bucket.object_keys() if k.startswith("store/agent_runs/date=")]

    rerun_completes_only_the_missing_runs(bucket_suite, defs, instance, survived)

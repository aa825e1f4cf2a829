"""Partitions materialized by separate processes: in parallel beside a SQL reader, and after kill -9."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import duckdb
import pytest

from eval_pipeline.store import publish_results, query, read_journals
from eval_pipeline_tests.pipeline.processes import (
    MATERIALIZE,
    count,
    finish,
    rerun_completes_only_the_missing_runs,
    start,
)
from eval_pipeline_tests.pipeline.small_suite import (
    DAY,
    MODELS,
    agent_requests,
    prepare,
)

pytestmark = pytest.mark.slow

# Counts rows through results.duckdb, read-only, in a loop until told to stop.
READ_IN_A_LOOP = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import duckdb

    database, stop = sys.argv[1], Path(sys.argv[2])
    reads = 0
    while not stop.exists():
        with duckdb.connect(database, read_only=True) as connection:
            connection.execute("SELECT count(*) FROM agent_runs").fetchone()
            connection.execute("SELECT count(*) FROM grades").fetchone()
        reads += 1
        time.sleep(0.01)  # leave the writers some CPU on a small machine
    print()  # ends any progress bar's line
    print(json.dumps({"reads": reads}))
    """
)


def test_two_models_in_parallel_processes_beside_a_reader(small_suite, tmp_path, instance):
    prepare(small_suite, instance)
    small_suite.agent.latency_s = 0.05  # the two materializations overlap for a while
    stop = tmp_path / "stop"
    publish_results(small_suite.layout)  # the file a person's session reads
    reader = start(READ_IN_A_LOOP, str(small_suite.results), str(stop), log=tmp_path / "reader.log")
    writers = [
        start(
            MATERIALIZE,
            str(small_suite.root),
            model,
            DAY,
            log=tmp_path / f"writer-{i}.log",
        )
        for i, model in enumerate(MODELS)
    ]
    while any(w.poll() is None for w in writers):
        publish_results(small_suite.layout)  # as an evaluation's last step does, meanwhile
        time.sleep(0.2)
    outcomes = [finish(w, tmp_path / f"writer-{i}.log") for i, w in enumerate(writers)]
    stop.touch()
    reads = finish(reader, tmp_path / "reader.log")["reads"]

    assert outcomes == [{"success": True, "executed": 4, "reused": 0}] * 2
    assert reads > 0
    publish_results(small_suite.layout)
    with duckdb.connect(str(small_suite.results), read_only=True) as published:
        assert published.execute("SELECT count(*) FROM agent_runs").fetchone()[0] == 8
    assert [agent_requests(small_suite.agent, m) for m in MODELS] == [7, 7]
    assert count(small_suite, "agent_runs") == 8
    assert count(small_suite, "grades") == 8
    assert count(small_suite, "model_summaries") == 2
    per_model = query(
        small_suite.layout,
        "SELECT model, count(*) AS n, bool_and(passed) AS ok FROM grades GROUP BY model ORDER BY model",
    )
    assert per_model.values.tolist() == [[MODELS[0], 4, True], [MODELS[1], 4, True]]


def test_a_partition_killed_mid_run_continues_where_it_stopped(small_suite, tmp_path, instance):
    small_suite.write_config(threads=1)  # runs finish one by one...
    small_suite.agent.latency_s = 0.3  # ...slowly enough to kill the process between two
    defs = prepare(small_suite, instance)
    journal = small_suite.layout.journal_dir / "agent_runs"
    log = tmp_path / "killed.log"
    process = start(MATERIALIZE, str(small_suite.root), MODELS[0], DAY, log=log)

    deadline = time.monotonic() + 60
    while len(read_journals(journal.rglob("*.jsonl"))) < 2:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no run was journaled"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    survived = read_journals(journal.rglob("*.jsonl"))
    assert 2 <= len(survived) < 4
    assert count(small_suite, "agent_runs") == 0  # nothing reached the store but the journal

    rerun_completes_only_the_missing_runs(small_suite, defs, instance, survived)
    assert not list(journal.rglob("*.jsonl"))  # the journal was folded into the store

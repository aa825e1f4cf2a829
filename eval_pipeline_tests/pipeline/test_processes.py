"""Partitions materialized by separate processes: in parallel beside a SQL reader, and after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.store import publish_results, query, read_journals
from eval_pipeline_tests.pipeline.small_suite import (
    CASES,
    DAY,
    EVALUATION,
    MODELS,
    SmallSuite,
    agent_requests,
    evaluate,
    prepare,
    run_counts,
)

pytestmark = pytest.mark.slow

# Materializes one partition in a process of its own and prints what its agent_runs step did.
# The instance is ephemeral (a SQLite one costs seconds per process here): what these tests are
# about is the result store the processes share.
MATERIALIZE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import dagster as dg
    from eval_pipeline.defs import build_definitions
    from eval_pipeline_tests.pipeline.small_suite import materialize
    from eval_pipeline.defs.partitions import model_day_key

    root, model, day = sys.argv[1:4]
    defs = build_definitions(Path(root))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", [model])
        result = materialize(
            defs, {assets!r}, partition_key=model_day_key(model, day), instance=instance
        )
        (event,) = result.asset_materializations_for_node("agent_runs")
        counts = {{k: v.value for k, v in event.metadata.items() if k in ("executed", "reused")}}
    print()  # ends any progress bar's line
    print(json.dumps({{"success": result.success, **counts}}))
    """
).format(assets=EVALUATION)

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


def start(code: str, *args: str, log: Path) -> subprocess.Popen:
    """A Python process running `code`; its logs go to `log` (Dagster logs a lot)."""
    with open(log, "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=stderr, text=True
        )


def finish(process: subprocess.Popen, log: Path, timeout: float = 120) -> dict:
    """The JSON the process printed last, on a line of its own: DuckDB draws a progress bar
    on stdout for a query slower than 2 s (a loaded machine), with no line end."""
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, log.read_text()[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def count(suite: SmallSuite, table: str) -> int:
    return int(query(suite.layout, f"SELECT count(*) AS n FROM {table}").n[0])


def rerun_completes_only_the_missing_runs(
    suite: SmallSuite, defs, instance, survived: list[dict]
) -> None:
    """Re-execute the killed partition: only the runs its journal lacks reach the agent, and
    the store then holds all four runs and grades."""
    suite.agent.latency_s = 0.0
    requests = agent_requests(suite.agent)
    result = evaluate(defs, instance, MODELS[0])

    done = {run["case_name"] for run in survived}
    missing = [name for name in (*CASES, "greets_the_team") if name not in done]
    assert run_counts(result) == {
        "runs": 4,
        "executed": len(missing),
        "reused": len(survived),
        "carried_over": 0,
    }
    assert agent_requests(suite.agent) - requests == sum(
        2 if name in CASES else 1 for name in missing
    )
    assert count(suite, "agent_runs") == 4
    assert count(suite, "grades") == 4


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

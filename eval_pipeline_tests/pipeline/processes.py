"""Partitions materialized by processes of their own: the scripts they run, starting and
finishing them, and what a re-execution after a killed worker must find."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from eval_pipeline.store import query
from eval_pipeline_tests.pipeline.small_suite import (
    CASES,
    EVALUATION,
    MODELS,
    SmallSuite,
    agent_requests,
    evaluate,
    run_counts,
)

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


# Queries the history through the store's own connection (DuckDB with the bucket registered),
# as `eval-pipeline sql` does, in a loop until told to stop; every answer must be whole.
READ_BUCKET_IN_A_LOOP = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from eval_pipeline.store import StateFolder, fetch
    from eval_pipeline.suite import load_config

    layout = StateFolder.of(load_config(Path(sys.argv[1])))
    stop = Path(sys.argv[2])
    reads, partial = 0, []
    while not stop.exists():
        _, rows = fetch(
            layout, "SELECT model, run_date, count(*) FROM agent_runs GROUP BY model, run_date"
        )
        partial += [n for _, _, n in rows if n != 4]  # a partition is there whole or not at all
        reads += 1
        time.sleep(0.05)
    print()  # ends any progress bar's line
    print(json.dumps({"reads": reads, "partial": partial}))
    """
)

"""Peak memory of `eval-pipeline test` against hostile endpoints, next to the configured caps.

Run: python benchmarks/hostile.py [--only big,bomb,result,postgres,mysql,cells-duckdb,...]

Starts real local servers and evaluates one test against each, through the real CLI in a
child process, whose peak memory over its process tree (the sum of its processes' PSS,
sampled every 0.25 s), peak RSS (`os.wait4`) and wall time are printed:

* `big`: an external agent answering a 200 MB body;
* `bomb`: an external agent answering a gzip bomb (about 1 MB on the wire, 1 GB inflated);
* `result`: the built-in agent, whose scripted OpenAI-compatible model runs one query
  returning 10,000 rows of ~96 KB;
* `postgres`, `mysql`: the same agent on a throwaway PostgreSQL 15 / MariaDB (as the
  warehouse tests start them, through a read-only role), one query returning 3,000 rows of
  5 MB (`repeat('x', 5000000)`): 15 GB if it were all read;
* `cells-duckdb`, `cells-postgres`, `cells-postgres-2`, `cells-mysql`: rows of few but huge
  cells (three of 300 MB, two of 900 MB on PostgreSQL; on MariaDB, whose rows its
  `max_allowed_packet` bounds, rows of four 15 MB cells).

The caps are the defaults of the `limits:` block (docs/limits.md); before they existed the
same runs peaked at 2.6 GB, 2.5 GB and 10.1 GB. Before MySQL results were read row by row
(1,000-row `fetchmany` batches), `mysql` peaked at 2,692 MB to keep 122 rows (430 MB on
`postgres`; 417 MB on `mysql` since).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script from the repository root: the test helpers live next to the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pipeline_scale import PeakMemory
from eval_pipeline.suite import Limits
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    by_turn,
    execute_sql,
    large_body,
    repeat,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import write_suite

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
HUGE_QUERY = "SELECT range AS i, repeat('x', 96000) AS s FROM range(10000)"
SERVER_QUERY = {
    "postgres": "SELECT i, repeat('x', 5000000) AS s FROM generate_series(1, 3000) AS i",
    "mysql": "SELECT seq AS i, repeat('x', 5000000) AS s FROM seq_1_to_3000",
    "cells-postgres": "SELECT repeat('x', 300000000) AS big FROM generate_series(1, 3)",
    "cells-postgres-2": "SELECT repeat('x', 900000000) AS big FROM generate_series(1, 2)",
    "cells-mysql": "SELECT "
    + ", ".join(f"repeat('x', 15000000) AS c{i}" for i in range(4))
    + " FROM seq_1_to_20",
}
#: Huge cells on the suite's own DuckDB warehouse.
DUCKDB_CELLS = "SELECT repeat('x', 300000000) AS big FROM range(3)"


def evaluate(suite: Path, model: str) -> tuple[float, float, float, str]:
    """Peak memory of the process tree (sum of PSS, MB), peak RSS (MB) and wall time (s) of
    `eval-pipeline test` in a child, and its run's message."""
    env = {k: v for k, v in os.environ.items() if k not in {"DAGSTER_HOME", "EVAL_SUITE_DIR"}}
    started = time.monotonic()
    child = subprocess.Popen(
        [str(SCRIPT), "test", "-m", model, "--date", "2026-01-01", "--format", "json"],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert child.stdout is not None
    memory = PeakMemory(child.pid)
    memory.start()
    output = child.stdout.read()
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    wall = time.monotonic() - started
    tree = memory.stop()
    try:
        result = json.loads(output)["results"][0]
        said = f"{result['status']}: {(result.get('message') or '')[:90]}"
    except (ValueError, LookupError):
        said = "no results document"
    return tree, usage.ru_maxrss / 1024, wall, said


def evaluate_on_server(root: Path, scenario: str) -> tuple[float, float, float, str]:
    """`evaluate` of the built-in agent on a fresh server of `kind` running SERVER_QUERY."""
    import yaml

    from eval_pipeline_tests.warehouses.servers import (
        mariadb_server,
        postgres_server,
        read_only_role,
    )

    start = postgres_server if "postgres" in scenario else mariadb_server
    with start() as owner, ScriptedServer("openai") as model:
        server = read_only_role(owner)
        query = SERVER_QUERY[scenario]
        model.set_script(by_turn(tool_calls(execute_sql(query)), answer("Done.")))
        providers = [{"provider": "openai", "base_url": model.base_url, "api_key": "k"}]
        suite = write_suite(root, cases={"hostile": "Answer."}, dbt=False, providers=providers)
        config = yaml.safe_load((suite / "eval_config.yaml").read_text())
        del config["warehouse"]
        config["databases"] = [{"name": "shop", "type": server.kind, "url": server.url}]
        (suite / "eval_config.yaml").write_text(yaml.safe_dump(config))
        return evaluate(suite, "openai:gpt-4.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="big,bomb,result,postgres,mysql")
    parser.add_argument("--with-cells", action="store_true", help="and every cells-* scenario")
    options = parser.parse_args()
    chosen = options.only.split(",")
    if options.with_cells:
        chosen += ["cells-duckdb", *(name for name in SERVER_QUERY if name.startswith("cells-"))]
    limits = Limits()
    print(
        f"caps: response_max_bytes={limits.response_max_bytes:,} "
        f"query_max_bytes={limits.query_max_bytes:,} "
        f"query_cell_max_bytes={limits.query_cell_max_bytes:,} "
        f"query_memory_limit={limits.query_memory_limit}"
    )
    print(f"{'scenario':<17} {'tree PSS':>10} {'peak RSS':>10} {'wall':>8}  run")
    with tempfile.TemporaryDirectory() as folder:
        for name in chosen:
            if name in SERVER_QUERY:
                figures = evaluate_on_server(Path(folder) / name, name)
                print(
                    f"{name:<17} {figures[0]:>7.0f} MB {figures[1]:>7.0f} MB {figures[2]:>6.1f} s  {figures[3]}"
                )
                continue
            server = ScriptedServer(
                "openai" if name in ("result", "cells-duckdb") else "agent"
            ).start()
            try:
                if name in ("result", "cells-duckdb"):
                    query = HUGE_QUERY if name == "result" else DUCKDB_CELLS
                    server.set_script(by_turn(tool_calls(execute_sql(query)), answer("Done.")))
                    entries: dict = {
                        "providers": [
                            {"provider": "openai", "base_url": server.base_url, "api_key": "k"}
                        ]
                    }
                    model = "openai:gpt-4.1"
                else:
                    body = (
                        large_body(200_000_000)
                        if name == "big"
                        else large_body(1_000_000_000, gzip=True)
                    )
                    server.set_script(repeat(body))
                    entries = {
                        "agents": [{"name": "hostile", "url": server.base_url, "timeout_s": 120}]
                    }
                    model = "http:hostile"
                suite = write_suite(
                    Path(folder) / name, cases={"hostile": "Answer."}, dbt=False, **entries
                )
                figures = evaluate(suite, model)
            finally:
                server.stop()
            print(
                f"{name:<17} {figures[0]:>7.0f} MB {figures[1]:>7.0f} MB {figures[2]:>6.1f} s  {figures[3]}"
            )


if __name__ == "__main__":
    main()

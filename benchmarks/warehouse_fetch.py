"""Benchmark fetching a large reference result from PostgreSQL: ADBC vs SQLAlchemy+psycopg vs pandas.

Run: python benchmarks/warehouse_fetch.py [--rows 1000000] [--repeats 3] [--queries 200]

Starts a throwaway PostgreSQL 15 (as the warehouse tests do), fills a table of `rows` × 6
columns (INTEGER, TEXT, DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC(12,2)) and fetches
`SELECT * FROM big` into a pandas DataFrame with each candidate:

* adbc        — `adbc_driver_postgresql.dbapi`: COPY in binary, Arrow batches with NUMERIC
                decoded as `eval_pipeline.warehouses` does, `.to_pandas()`
* sqlalchemy  — `pandas.read_sql(text(sql), engine)` on `postgresql+psycopg` (psycopg 3)
* baseline    — `pandas.read_sql(sql, psycopg_connection)` (a plain DBAPI connection)

Each fetch runs in a fresh process; time is the fetch's wall time, memory is the process's
peak resident set (VmHWM) minus its resident set after the imports and the connection, so
C allocations (libpq, Arrow) count too, which tracemalloc would miss. Medians of `repeats`.

Then the agent-side cost: `queries` small queries (a filtered aggregate of 10,000 rows)
through the built-in agent's sandbox, `ServerSandbox` on PostgreSQL against `SqlSandbox`
on a DuckDB copy of the same table; median and p95 milliseconds per query.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CANDIDATES = ("baseline", "sqlalchemy", "adbc")
QUERY = "SELECT * FROM big"


def _memory_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def fetch_once(candidate: str, url: str) -> dict:
    """One fetch in this process: seconds and peak extra memory (MB), and the frame's dtypes."""
    import pandas as pd

    if candidate == "adbc":
        import adbc_driver_postgresql.dbapi as adbc
        import pyarrow as pa

        connection = adbc.connect(url)
        cursor = connection.cursor()

        from eval_pipeline.warehouses._arrow import normalise_postgres

        def fetch() -> pd.DataFrame:
            # As the warehouses layer reads it: NUMERIC decoded from the driver's text.
            cursor.execute(QUERY)
            batches = [normalise_postgres(b) for b in cursor.fetch_record_batch()]
            return pa.Table.from_batches(batches).to_pandas(date_as_object=True)

    elif candidate == "sqlalchemy":
        import sqlalchemy as sa

        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        connection = engine.connect()

        def fetch() -> pd.DataFrame:
            return pd.read_sql(sa.text(QUERY), connection)

    else:
        import warnings

        import psycopg

        connection = psycopg.connect(url)
        warnings.simplefilter("ignore", UserWarning)  # pandas: "only SQLAlchemy is supported"

        def fetch() -> pd.DataFrame:
            return pd.read_sql(QUERY, connection)

    before = _memory_kb("VmRSS")
    started = time.perf_counter()
    frame = fetch()
    seconds = time.perf_counter() - started
    peak = _memory_kb("VmHWM")
    connection.close()
    return {
        "seconds": seconds,
        "peak_mb": (peak - before) / 1024,
        "rows": len(frame),
        "dtypes": {str(k): str(v) for k, v in frame.dtypes.items()},
    }


def sandbox_costs(url: str, queries: int) -> None:
    """Median and p95 per small query through each sandbox, on the same 10,000 rows."""
    import tempfile

    import duckdb
    import psycopg

    from eval_pipeline.sandbox import ServerSandbox, SqlSandbox
    from eval_pipeline.suite import DatabaseConfig, Templated

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE small AS SELECT * FROM big WHERE id <= 10000")
    sql = "SELECT day, count(*) AS n, sum(amount) AS total FROM small WHERE id % {k} = 0 GROUP BY day ORDER BY day LIMIT 20"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "small.duckdb"
        with duckdb.connect(str(path)) as connection:
            connection.execute(
                "CREATE TABLE small AS SELECT i AS id, DATE '2024-01-01' + (i % 366)::INTEGER AS day, "
                "((i % 100000) / 100.0)::DECIMAL(12, 2) AS amount FROM range(1, 10001) AS t(i)"
            )
        database = DatabaseConfig("bench", "postgres", url=Templated(url, secret="url_password"))
        sandboxes = {
            "duckdb": SqlSandbox.for_file(path),
            "postgres": ServerSandbox(database),
        }
        print(f"\n{queries} small queries through the agent's sandbox (ms per query)")
        print(f"{'sandbox':<12}{'median':>10}{'p95':>10}")
        for name, sandbox in sandboxes.items():
            times = []
            for k in range(queries):
                started = time.perf_counter()
                sandbox.execute(sql.format(k=2 + k % 7))
                times.append((time.perf_counter() - started) * 1000)
            sandbox.close()
            times.sort()
            p95 = times[int(len(times) * 0.95) - 1]
            print(f"{name:<12}{statistics.median(times):>10.2f}{p95:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--child", nargs=2, metavar=("CANDIDATE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(fetch_once(*args.child)))
        return

    import psycopg

    from eval_pipeline_tests.warehouses.servers import postgres_missing, postgres_server

    if reason := postgres_missing():
        sys.exit(reason)
    with postgres_server() as server:
        with psycopg.connect(server.url, autocommit=True) as connection:
            connection.execute(
                "CREATE TABLE big AS SELECT i AS id, 'customer ' || (i % 5000) AS name, "
                "DATE '2024-01-01' + (i % 366)::INTEGER AS day, "
                "TIMESTAMP '2024-01-01' + i * INTERVAL '1 second' AS created_at, "
                "TIMESTAMPTZ '2024-01-01 00:00+00' + i * INTERVAL '1 second' AS paid_at, "
                "(i % 100000) / 100.0::NUMERIC(12, 2) AS amount "
                f"FROM generate_series(1, {args.rows}) AS i"
            )
        print(f"PostgreSQL 15, SELECT * FROM big: {args.rows:,} rows × 6 columns")
        print(f"{'candidate':<12}{'median s':>10}{'median peak MB':>16}  dtypes")
        for candidate in CANDIDATES:
            runs = []
            for _ in range(args.repeats):
                child = subprocess.run(
                    [sys.executable, __file__, "--child", candidate, server.url],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
            assert all(run["rows"] == args.rows for run in runs)
            seconds = statistics.median(run["seconds"] for run in runs)
            peak = statistics.median(run["peak_mb"] for run in runs)
            dtypes = ", ".join(runs[0]["dtypes"].values())
            print(f"{candidate:<12}{seconds:>10.2f}{peak:>16.0f}  {dtypes}")
        sandbox_costs(server.url, args.queries)


if __name__ == "__main__":
    main()

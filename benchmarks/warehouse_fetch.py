"""Benchmark fetching a large reference result: PostgreSQL (ADBC vs SQLAlchemy+psycopg vs pandas), Snowflake (the connector's Arrow batches vs its rows vs ADBC), BigQuery (the client's own Arrow vs our engine) or ClickHouse (clickhouse-driver's reads).

Run: python benchmarks/warehouse_fetch.py [--engine postgres|snowflake|bigquery|clickhouse]
     [--rows 1000000] [--repeats 3] [--queries 200]

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

With `--engine snowflake` the table is made in the Snowflake emulator the tests start
(fakesnow in server mode, `eval_pipeline_tests/warehouses/snowflake_server.py`: INTEGER,
TEXT, DATE, TIMESTAMP_NTZ, TIMESTAMP_TZ, NUMBER(12,2)) and fetched with:

* connector-arrow — `snowflake-connector-python`'s `fetch_arrow_batches`, each batch cast to
                    its column's type as `eval_pipeline.warehouses` does, `.to_pandas()`
* connector-rows  — the same connector's `fetchall()` into a DataFrame (Python rows)
* adbc            — `adbc_driver_snowflake.dbapi` (if installed), `fetch_arrow_table()`

The emulator answers with the whole result in its first response; a real account sends the
first rows inline and the rest as chunks the client downloads, so these figures compare the
clients' decoding and memory, not Snowflake's network path.

With `--engine clickhouse`: a throwaway ClickHouse (Debian's 18.16, as the warehouse tests
start it), the same 6 columns in ClickHouse's types (Int32, String, Date, DateTime,
DateTime('UTC'), Decimal(12, 2)), read as its read-only user into a DataFrame by each of
clickhouse-driver's ways (`CLICKHOUSE_CANDIDATES`), the same way measured:

* rows        — `Client.execute`: Python tuples, one per row (the driver's default)
* columnar    — `Client.execute(columnar=True)`: a Python tuple per column
* numpy       — `Client.query_dataframe` with `use_numpy`: NumPy columns
* arrow       — `Client.query_arrow` (new in 0.2.11): Arrow from NumPy and Arrow buffers
* eval        — `eval_pipeline.warehouses`' ClickHouse session (what the sandbox reads)

With `--engine bigquery` the same 6 columns (INT64, STRING, DATE, DATETIME, TIMESTAMP,
NUMERIC) are a table of bqemulator (started as the BigQuery tests start it), fetched by the
real `google-cloud-bigquery` in a fresh process each: `bq-engine` is the engine's session
(`BigQueryConnection.stream`: REST pages of 2,000 rows turned into typed Arrow batches),
`bq-to-arrow` the client's own `RowIterator.to_arrow` over the same REST pages. The
Storage Read API is not measured: the emulator does not serve a query's result through it.
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
SNOWFLAKE_CANDIDATES = ("connector-rows", "connector-arrow", "adbc")
CLICKHOUSE_CANDIDATES = ("rows", "columnar", "numpy", "arrow", "eval")
BIGQUERY_CANDIDATES = ("bq-to-arrow", "bq-engine")
QUERY = "SELECT * FROM big"


def _memory_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def fetch_once(candidate: str, url: str) -> dict:
    """One fetch in this process: seconds and peak extra memory (MB), and the frame's dtypes."""
    import pandas as pd

    if candidate.startswith("bq-"):
        connection, fetch = _bigquery_fetcher(candidate, url)
    elif url.startswith("{"):  # the Snowflake emulator's connection, as JSON
        connection, fetch = _snowflake_fetch(candidate, json.loads(url))
    elif candidate in CLICKHOUSE_CANDIDATES:
        connection, fetch = clickhouse_fetch(candidate, url)
    elif candidate == "adbc":
        import adbc_driver_postgresql.dbapi as adbc
        import pyarrow as pa

        connection = adbc.connect(url)
        cursor = connection.cursor()

        from eval_pipeline.warehouses._arrow import (  # the unit itself: measured alone
            normalise_postgres,
        )

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


def _bigquery_fetcher(candidate: str, url: str):
    """(something to close, a fetch) for a BigQuery candidate on the emulator at `url`."""
    import pandas as pd
    import pyarrow as pa

    from eval_pipeline.suite import DatabaseConfig, Templated
    from eval_pipeline.warehouses import connect
    from eval_pipeline_tests.warehouses.bigquery_server import Emulator

    emulator = Emulator(url, Path("/dev/null"), 0)
    if candidate == "bq-to-arrow":
        client = emulator.client()

        def fetch() -> pd.DataFrame:
            rows = client.query("SELECT * FROM bench.big").result(page_size=2_000)
            return rows.to_arrow(create_bqstorage_client=False).to_pandas(date_as_object=True)

        return client, fetch
    database = DatabaseConfig(
        "bench", "bigquery", url=Templated(emulator.url(dataset="bench"), secret="url_password")
    )
    connection = connect(database)

    def fetch() -> pd.DataFrame:
        connection.begin_read_only(3600.0)
        stream = connection.stream(QUERY)
        table = pa.Table.from_batches(list(stream.batches))
        connection.end()
        return table.to_pandas(date_as_object=True)

    return connection, fetch


def bigquery_main(args: argparse.Namespace) -> None:
    import tempfile

    from eval_pipeline_tests.warehouses.bigquery_server import PROJECT, bigquery_emulator

    with tempfile.TemporaryDirectory() as folder, bigquery_emulator(Path(folder)) as emulator:
        client = emulator.client()
        client.create_dataset(f"{PROJECT}.bench")
        client.query(
            "CREATE TABLE bench.big AS SELECT i AS id, CONCAT('customer ', CAST(MOD(i, 5000) AS STRING)) AS name, "
            "DATE_ADD(DATE '2024-01-01', INTERVAL MOD(i, 366) DAY) AS day, "
            "DATETIME_ADD(DATETIME '2024-01-01', INTERVAL i SECOND) AS created_at, "
            "TIMESTAMP_ADD(TIMESTAMP '2024-01-01 00:00:00+00', INTERVAL i SECOND) AS paid_at, "
            "CAST(MOD(i, 100000) AS NUMERIC) / 100 AS amount "
            f"FROM UNNEST(GENERATE_ARRAY(1, {args.rows})) AS i"
        ).result()
        client.close()
        print(f"bqemulator 1.4.0, SELECT * FROM big: {args.rows:,} rows × 6 columns")
        _compare(BIGQUERY_CANDIDATES, emulator.endpoint, args)


def _snowflake_fetch(candidate: str, params: dict):
    """A connection to the emulator and the fetch of `candidate` over it."""
    import pandas as pd
    import pyarrow as pa

    if candidate == "adbc":
        import adbc_driver_snowflake.dbapi as adbc

        connection = adbc.connect(
            db_kwargs={
                "username": params["user"],
                "password": params["password"],
                "adbc.snowflake.sql.account": params["account"],
                "adbc.snowflake.sql.db": params["database"],
                "adbc.snowflake.sql.schema": params["schema"],
                "adbc.snowflake.sql.warehouse": params["warehouse"],
                "adbc.snowflake.sql.uri.host": params["host"],
                "adbc.snowflake.sql.uri.port": str(params["port"]),
                "adbc.snowflake.sql.uri.protocol": params["protocol"],
            }
        )
        cursor = connection.cursor()

        def fetch() -> pd.DataFrame:
            cursor.execute(QUERY)
            return cursor.fetch_arrow_table().to_pandas(date_as_object=True)

        return connection, fetch

    import snowflake.connector

    from eval_pipeline.warehouses._snowflake_types import (  # the unit itself: measured alone
        arrow_type_of,
        conform_batch,
    )

    connection = snowflake.connector.connect(**params, client_prefetch_threads=1)
    cursor = connection.cursor()

    def fetch_rows() -> pd.DataFrame:
        cursor.execute(QUERY)
        return pd.DataFrame(cursor.fetchall(), columns=[d.name for d in cursor.description])

    def fetch_arrow() -> pd.DataFrame:
        # As the warehouses layer reads it: each batch cast to its column's declared type.
        cursor.execute(QUERY)
        kinds = [arrow_type_of(d.type_code, d.precision, d.scale) for d in cursor.description]
        batches = [
            conform_batch(batch, kinds)
            for table in cursor.fetch_arrow_batches(force_microsecond_precision=True)
            for batch in table.to_batches()
        ]
        return pa.Table.from_batches(batches).to_pandas(date_as_object=True)

    return connection, fetch_rows if candidate == "connector-rows" else fetch_arrow


def snowflake_main(args: argparse.Namespace) -> None:
    """The Snowflake candidates on the emulator the tests start."""
    from eval_pipeline_tests.warehouses.snowflake_server import (
        DATABASE,
        OWNER,
        SCHEMA,
        WAREHOUSE,
        snowflake_server,
    )

    with snowflake_server() as server:
        connection = server.connect(OWNER)
        connection.cursor().execute(
            "CREATE TABLE big AS SELECT i AS id, 'customer ' || (i % 5000) AS name, "
            "DATEADD(day, i % 366, '2024-01-01'::DATE) AS day, "
            "DATEADD(second, i, '2024-01-01 00:00:00'::TIMESTAMP_NTZ) AS created_at, "
            "DATEADD(second, i, '2024-01-01 00:00:00 +00:00'::TIMESTAMP_TZ) AS paid_at, "
            "((i % 100000) / 100.0)::NUMBER(12, 2) AS amount "
            f"FROM (SELECT SEQ4() + 1 AS i FROM TABLE(GENERATOR(ROWCOUNT => {args.rows})))"
        )
        connection.close()
        params = {
            "user": OWNER,
            "password": server.config["users"][OWNER]["password"],
            "account": "emulated",
            "database": DATABASE,
            "schema": SCHEMA,
            "warehouse": WAREHOUSE,
            **server.address,
        }
        params["port"] = int(params["port"])
        print(f"Snowflake emulator (fakesnow), SELECT * FROM big: {args.rows:,} rows × 6 columns")
        _compare(SNOWFLAKE_CANDIDATES, json.dumps(params), args)


def _compare(candidates: tuple[str, ...], url: str, args: argparse.Namespace) -> None:
    """Each candidate's median time and peak memory over `args.repeats` fresh processes."""
    print(f"{'candidate':<16}{'median s':>10}{'median peak MB':>16}  dtypes")
    for candidate in candidates:
        runs = []
        for _ in range(args.repeats):
            child = subprocess.run(
                [sys.executable, __file__, "--child", candidate, url],
                capture_output=True,
                text=True,
            )
            if child.returncode != 0:
                last = (child.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"{candidate:<16}{'—':>10}{'—':>16}  not measured: {last}")
                break
            runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
        else:
            assert all(run["rows"] == args.rows for run in runs)
            seconds = statistics.median(run["seconds"] for run in runs)
            peak = statistics.median(run["peak_mb"] for run in runs)
            dtypes = ", ".join(runs[0]["dtypes"].values())
            print(f"{candidate:<16}{seconds:>10.2f}{peak:>16.0f}  {dtypes}")


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
        # The test server's superuser: the role check still runs, and is accepted.
        url_ = Templated(url, secret="url_password")
        database = DatabaseConfig("bench", "postgres", url=url_, allow_privileged_role=True)
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
    parser.add_argument(
        "--engine",
        choices=("postgres", "snowflake", "bigquery", "clickhouse"),
        default="postgres",
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--child", nargs=2, metavar=("CANDIDATE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(fetch_once(*args.child)))
        return
    if args.engine == "snowflake":
        snowflake_main(args)
        return
    if args.engine == "clickhouse":
        clickhouse_benchmark(args)
        return
    if args.engine == "bigquery":
        bigquery_main(args)
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
        _compare(CANDIDATES, server.url, args)
        sandbox_costs(server.url, args.queries)


def clickhouse_fetch(candidate: str, url: str):  # -> (connection, fetch)
    """A ClickHouse session of `url` and the fetch of QUERY into a DataFrame by `candidate`."""
    from urllib.parse import urlsplit

    import pandas as pd
    import pyarrow as pa
    from clickhouse_driver import Client

    if candidate == "eval":
        from eval_pipeline.suite import DatabaseConfig, Templated
        from eval_pipeline.warehouses import ClickHouseConnection

        database = DatabaseConfig("bench", "clickhouse", url=Templated(url, secret="url_password"))
        session = ClickHouseConnection(database, url)

        def fetch() -> pd.DataFrame:
            session.begin_read_only(600)
            table = pa.Table.from_batches(list(session.stream(QUERY).batches))
            return table.to_pandas(date_as_object=True)

        return session, fetch
    parts = urlsplit(url)
    client = Client(
        parts.hostname,
        port=parts.port,
        user=parts.username,
        password=parts.password,
        database=parts.path.lstrip("/"),
        settings={"use_numpy": candidate in ("numpy", "arrow")},
    )
    client.close = client.disconnect

    def fetch() -> pd.DataFrame:
        if candidate == "numpy":
            return client.query_dataframe(QUERY)
        if candidate == "arrow":
            return client.query_arrow(QUERY).to_pandas(date_as_object=True)
        if candidate == "columnar":
            columns, described = client.execute(QUERY, columnar=True, with_column_types=True)
            return pd.DataFrame(dict(zip([d[0] for d in described], columns, strict=True)))
        values, described = client.execute(QUERY, with_column_types=True)
        return pd.DataFrame.from_records(values, columns=[d[0] for d in described])

    return client, fetch


def clickhouse_benchmark(args: argparse.Namespace) -> None:
    rows = args.rows
    from eval_pipeline_tests.warehouses.clickhouse_server import (
        clickhouse_missing,
        clickhouse_server,
    )

    if reason := clickhouse_missing():
        sys.exit(reason)
    with clickhouse_server() as server:
        client = server.client()
        client.execute(
            "CREATE TABLE big (id Int32, name String, day Date, created_at DateTime, "
            "paid_at DateTime('UTC'), amount Decimal(12, 2)) ENGINE = MergeTree ORDER BY id"
        )
        client.execute(
            "INSERT INTO big SELECT toInt32(number + 1), concat('customer ', "
            "toString((number + 1) % 5000)), toDate('2024-01-01') + ((number + 1) % 366), "
            "toDateTime('2024-01-01 00:00:00') + (number + 1), "
            "toDateTime('2024-01-01 00:00:00', 'UTC') + (number + 1), "
            f"toDecimal64(((number + 1) % 100000) / 100, 2) FROM system.numbers LIMIT {rows}"
        )
        client.disconnect()
        print(f"ClickHouse 18.16, SELECT * FROM big: {rows:,} rows × 6 columns")
        _compare(CLICKHOUSE_CANDIDATES, server.url, args)


if __name__ == "__main__":
    main()

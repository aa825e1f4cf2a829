"""Which filesystem a bucket store reads through: s3fs vs pyarrow.fs.S3FileSystem, on moto_server.

Run: python benchmarks/bucket_filesystems.py [--partitions 60] [--repeats 5]

Writes `--partitions` small Parquet files (one grades partition each, as the store does) to a
bucket on a local `moto_server`, then times, median of `--repeats`:

* DuckDB over the files (glob + read_parquet, the views' shape), with the filesystem
  registered on the connection: s3fs directly, and pyarrow's S3FileSystem through fsspec's
  ArrowFSWrapper (DuckDB takes fsspec filesystems only);
* reading one partition file (the pipeline's `read_latest`): pyarrow over each filesystem.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline_tests.store.buckets import AWS_ENV, moto_endpoint


def median_s(action, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.update(AWS_ENV)
    import s3fs
    from fsspec.implementations.arrow import ArrowFSWrapper
    from pyarrow import fs as pafs

    with moto_endpoint() as endpoint:
        s3 = s3fs.S3FileSystem(endpoint_url=endpoint, use_listings_cache=False)
        s3.mkdir("bench")
        table = pa.table({"name": [f"case_{i}" for i in range(200)], "passed": [True] * 200})
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        for i in range(args.partitions):
            s3.pipe_file(
                f"bench/store/grades/date=2026-01-{i % 28 + 1:02d}/model=m{i}/1.parquet",
                buffer.getvalue(),
            )
        host = endpoint.removeprefix("http://")
        arrow = pafs.S3FileSystem(endpoint_override=host, scheme="http", region="us-east-1")

        class ArrowS3(ArrowFSWrapper):
            protocol = "s3"  # DuckDB routes s3:// paths to the filesystem claiming it

        wrapped = ArrowS3(arrow)
        sql = (
            "SELECT count(*), sum(passed::int) FROM read_parquet("
            "'s3://bench/store/grades/**/*.parquet', filename = true)"
        )
        results = {}
        whole = s3fs.S3FileSystem(
            endpoint_url=endpoint,
            use_listings_cache=False,
            default_cache_type="all",
            skip_instance_cache=True,
        )
        for label, filesystem in (
            ("s3fs", s3),
            ("s3fs, whole-file cache", whole),
            ("pyarrow S3 (ArrowFSWrapper)", wrapped),
        ):
            connection = duckdb.connect()
            connection.register_filesystem(filesystem)
            rows = connection.execute(sql).fetchall()
            assert rows == [(args.partitions * 200, args.partitions * 200)], rows
            results[f"DuckDB glob+read, {label}"] = median_s(
                lambda c=connection: c.execute(sql).fetchall(), args.repeats
            )
        one = "bench/store/grades/date=2026-01-01/model=m0/1.parquet"
        results["one partition, pyarrow over s3fs"] = median_s(
            lambda: pq.read_table(one, filesystem=s3), args.repeats
        )
        results["one partition, s3fs cat_file + pyarrow"] = median_s(
            lambda: pq.read_table(io.BytesIO(s3.cat_file(one))), args.repeats
        )
        results["one partition, pyarrow S3FileSystem"] = median_s(
            lambda: pq.read_table(one, filesystem=arrow), args.repeats
        )
    print(f"{args.partitions} partition files on moto_server, median of {args.repeats}:")
    for label, seconds in results.items():
        print(f"  {label:<45} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()

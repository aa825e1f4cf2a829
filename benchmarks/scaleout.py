"""Scale-out: a backfill of model partitions through daemon-launched runs, bucket store vs local.

Run: python benchmarks/scaleout.py [--models 3] [--tests 200] [--latency 0.5] [--threads 8]
         [--stores local,bucket] [--repeats 5]

For each store, a fresh small suite (built-in agent on a scripted OpenAI-compatible server
answering after `--latency` seconds; each data test takes two completions) with `--tests`
tests, the production instance (deploy/dagster.yaml on a throwaway PostgreSQL),
`dagster-webserver` and `dagster-daemon`; a backfill of `--models` model partitions is launched
through the UI's API and timed until every run finished. Printed per store: wall time, the
ideal (completions x latency / threads, the models running at once), wall / ideal, objects
(or files) written, and the documented history queries over the store (median of `--repeats`).
Needs PostgreSQL 15 and moto (the dev extra), like the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg
import httpx
import s3fs
import yaml

from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.store import files_below, query
from eval_pipeline_tests.cli.console import DEPLOY, production_env
from eval_pipeline_tests.pipeline.services import LAUNCH_BACKFILL, dagster_services
from eval_pipeline_tests.pipeline.small_suite import DAY, EVALUATION, open_small_suite, prepare
from eval_pipeline_tests.store.buckets import AWS_ENV, Bucket, moto_endpoint
from eval_pipeline_tests.warehouses.servers import postgres_server

QUERIES = {
    "pass rate per model over time": (
        "SELECT model, run_date, pass_rate FROM model_summaries ORDER BY run_date, model"
    ),
    "what one model got wrong": (
        "SELECT name, status, message FROM grades WHERE model = 'openai:gpt-a' "
        "AND status <> 'passed'"
    ),
    "flaky tests": (
        "SELECT name, model, count(*) AS runs, sum(passed::INT) AS passes FROM grades "
        "GROUP BY ALL HAVING passes BETWEEN 1 AND runs - 1"
    ),
}


def add_tests(root: Path, count: int) -> None:
    """`count` data tests the scripted analyst answers right (two completions each)."""
    for old in (root / "cases").glob("*.yml"):
        old.unlink()
    for i in range(count):
        (root / "cases" / f"revenue_{i:03d}.yml").write_text(
            yaml.safe_dump(
                {
                    "name": f"revenue_{i:03d}",
                    "prompt": f"What is the total revenue of all orders? (variant {i})",
                    "sql": "SELECT SUM(amount) AS revenue FROM orders",
                }
            )
        )


def run_once(store: str, args: argparse.Namespace, work: Path, pg, endpoint: str) -> dict:
    models = [f"openai:gpt-{chr(ord('a') + i)}" for i in range(args.models)]
    with open_small_suite(work / store / "suite") as suite:
        add_tests(suite.root, args.tests)
        bucket = None
        if store == "bucket":
            bucket = Bucket(endpoint, f"scaleout-{os.getpid()}-{int(time.time())}")
            s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket.name)
            suite.config["store"] = bucket.store_config
        suite.write_config(models=models, threads=args.threads)
        home = work / store / "dagster_home"
        home.mkdir(parents=True)
        shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
        env = {**production_env(home, pg), "EVAL_SUITE_DIR": str(suite.root)}
        os.environ.update(env)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            # one PostgreSQL for both stores: each starts from an empty instance
            instance.wipe()
            instance.add_dynamic_partitions("models", models)
            prepare(suite, instance)
        suite.agent.latency_s = args.latency
        with dagster_services(env, work / store) as port:
            params = {
                "partitionNames": [str(model_day_key(m, DAY)) for m in models],
                "assetSelection": [{"path": [name]} for name in EVALUATION],
                "fromFailure": False,
            }
            started = time.perf_counter()
            answer = httpx.post(
                f"http://127.0.0.1:{port}/graphql",
                json={"query": LAUNCH_BACKFILL, "variables": {"params": params}},
                timeout=120,
            ).json()
            backfill = answer["data"]["launchPartitionBackfill"]["backfillId"]
            with dg.DagsterInstance.from_config(str(home)) as instance:
                while True:
                    runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill}))
                    if len(runs) == len(models) and all(r.is_finished for r in runs):
                        break
                    time.sleep(0.5)
            wall = time.perf_counter() - started
            statuses = sorted(r.status.value for r in runs)
        layout = suite.layout
        if bucket is not None:
            objects = len(bucket.object_keys())
        else:
            objects = len(files_below(layout.tables_dir))
        timings = {}
        for label, sql in QUERIES.items():
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                query(layout, sql)
                times.append(time.perf_counter() - start)
            timings[label] = statistics.median(times)
        graded = int(query(layout, "SELECT count(*) AS n FROM grades").n[0])
    completions = 2 * args.tests * args.latency / args.threads
    return {
        "wall": wall,
        "ideal": completions,
        "objects": objects,
        "statuses": statuses,
        "graded": graded,
        "queries": timings,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--stores", default="local,bucket")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.update(AWS_ENV)
    saved = dict(os.environ)
    results = {}
    with (
        tempfile.TemporaryDirectory(prefix="scaleout-") as scratch,
        postgres_server() as pg,
        moto_endpoint() as endpoint,
    ):
        for store in args.stores.split(","):
            results[store] = run_once(store, args, Path(scratch), pg, endpoint)
            os.environ.clear()
            os.environ.update(saved)
    print(
        f"{args.models} models x {args.tests} tests, {args.latency * 1000:.0f} ms per completion, "
        f"threads {args.threads}, daemon-launched runs on PostgreSQL"
    )
    for store, r in results.items():
        print(
            f"  {store:<7} wall {r['wall']:6.1f} s  ideal {r['ideal']:5.1f} s  "
            f"wall/ideal {r['wall'] / r['ideal']:4.2f}  objects {r['objects']:5d}  "
            f"runs {r['statuses']}  grades {r['graded']}"
        )
        for label, seconds in r["queries"].items():
            print(f"          {label:<32} {seconds * 1000:7.1f} ms (median)")


if __name__ == "__main__":
    main()

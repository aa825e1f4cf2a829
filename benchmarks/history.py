"""Benchmark the result store over a year of history, and a rerun of an unchanged partition.

Run: python benchmarks/history.py [--days 365] [--models 10] [--cases 200] [--k 3]
         [--rewrites 0.1] [--repeats 5] [--store DIR] [--skip-dagster] [--compact]

1. History. Writes a synthetic history through the store's own writer (`write_rows`, one
   file per table and partition, as the assets do): for every model and day, `grades` (one
   row per case and attempt), `agent_runs` (the same runs, small rows: ids, status, tokens,
   cost, latency, a one-line reply; no transcripts) and `model_summaries` (one row).
   A share of the partitions (`--rewrites`) is written twice, the first time with other
   verdicts, as re-materializations do, so the views must pick each partition's latest file.
   Then times the publication of results.duckdb (`publish_results`, what the end of every
   evaluation does: the first, then the median of `--repeats` forced ones) with the file's
   size and the machine's load average, and the example queries of docs/results-in-sql.md: on results.duckdb
   opened read-only, as a person would (every row fetched as Python tuples); as
   `eval-pipeline sql` runs them (`head_read_only` with the table's default 100 rows: it
   reads results.duckdb, current here, and counts the rows it does not show); and through the
   package's own views in memory (what `query`, the viewer, and `eval-pipeline sql` while the
   file is stale read): the first run (cold) and the median of `--repeats` more.
   Target: < 100 ms. With `--compact`, then compacts the store (`compact_store`, cutoff: now)
   and times the publication and the queries again.

2. Rerun. Materializes agent_runs + grades + model_summaries of one partition of a small
   suite twice through Dagster against a scripted OpenAI-compatible server, and prints the
   second materialization's wall time, the agent requests it made (must be 0) and, for
   scale, Dagster's own cost: materializing a chain of three assets that do nothing, in the
   same way (in process, same instance).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb

# Run as a script from the repository root: the test helpers live next to the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_pipeline.pipeline import summarize_grades
from eval_pipeline.store import (
    StateFolder,
    compact_store,
    ensure_database,
    head_read_only,
    publish_results,
    query,
    write_rows,
)
from eval_pipeline_tests.pipeline.small_suite import (
    EVALUATION,
    MODELS,
    QUIET,
    agent_requests,
    evaluate,
    materialize,
    open_small_suite,
    prepare,
)

TARGET_MS = 100
# What `eval-pipeline sql` shows of a result as a table by default (`--limit`).
SHOWN_ROWS = 100


def queries(last_day: date) -> dict[str, str]:
    """The example queries of docs/results-in-sql.md; the flakiness window ends on the history's last day."""
    since = (last_day - timedelta(days=29)).isoformat()
    return {
        "pass rate by model and day": (
            "SELECT model, run_date, pass_rate FROM model_summaries ORDER BY run_date"
        ),
        "one model's grades": "SELECT name, status FROM grades WHERE model = 'model-3'",
        "flaky cases, last 30 days": f"""
            SELECT name, model,
                   count(*) AS days,
                   count(*) FILTER (WHERE 0 < passes AND passes < attempts) AS flaky_days
            FROM (
                SELECT name, model, run_date,
                       count(*) AS attempts, count(*) FILTER (WHERE passed) AS passes
                FROM grades
                WHERE run_date >= DATE '{since}'
                GROUP BY name, model, run_date
            )
            GROUP BY name, model
            HAVING flaky_days > 0
            ORDER BY flaky_days DESC, name, model
        """,
    }


# ---- 1. a year of history ------------------------------------------------------------------


def _partition_rows(
    model: int, day: date, cases: int, k: int, rng: random.Random
) -> tuple[list[dict], list[dict], dict]:
    model_id = f"model-{model}"
    skill = 0.55 + 0.04 * model
    grades, runs = [], []
    for case in range(cases):
        difficulty = (case % 10) / 20  # some cases are harder for everyone
        for attempt in range(k):
            roll = rng.random()
            status = "error" if roll < 0.01 else "passed" if roll < skill - difficulty else "failed"
            name = f"case-{case:03d}"
            key = f"{model}-{day:%Y%m%d}-{case}-{attempt}"
            tokens = 800 + (case * 37 + attempt * 11) % 1500
            duration = 1500.0 + (case * 53) % 4000
            grades.append(
                {
                    "name": name,
                    "model": model_id,
                    "run_date": day,
                    "attempt": attempt,
                    "run_key": key,
                    "content_hash": f"c{case:05d}",
                    "status": status,
                    "passed": status == "passed",
                    "message": "match" if status == "passed" else "row 1 differs",
                    "verified": True,
                    "tokens": tokens,
                    "cost_usd": tokens * 2e-6,
                    "duration_ms": duration,
                    "tool_call_count": 2,
                }
            )
            runs.append(
                {
                    "key": key,
                    "name": name,
                    "model": model_id,
                    "run_date": day,
                    "attempt": attempt,
                    "input_hash": f"i{case:05d}",
                    "context_hash": "ctx",
                    "status": "error" if status == "error" else "completed",
                    "final_text": "Revenue was 1,234.",
                    "total_tokens": tokens,
                    "cost_usd": tokens * 2e-6,
                    "duration_ms": duration,
                    "turns": 2,
                    "tool_call_count": 2,
                    "reused": False,
                }
            )
    summary = {**summarize_grades(grades).to_row("s1"), "run_date": day}
    return grades, runs, summary


def _write_model(args: tuple[str, int, date, int, int, int, float]) -> int:
    root, model, first_day, days, cases, k, rewrites = args
    layout = StateFolder(Path(root))
    rng = random.Random(model)
    files = 0
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        writes = 2 if rng.random() < rewrites else 1
        for _ in range(writes):  # the last write is the partition's current state
            grades, runs, summary = _partition_rows(model, day, cases, k, rng)
            where = {"model": f"model-{model}", "run_date": day}
            write_rows(layout, "agent_runs", runs, **where)
            write_rows(layout, "grades", grades, **where)
            write_rows(layout, "model_summaries", [summary], **where)
            files += 3
    return files


def write_history(
    layout: StateFolder, *, days: int, models: int, cases: int, k: int, rewrites: float
) -> tuple[float, int, date]:
    """Write the history, one process per model; returns (seconds, files, last day)."""
    ensure_database(layout)
    last_day = date.today()
    first_day = last_day - timedelta(days=days - 1)
    jobs = [(str(layout.root), m, first_day, days, cases, k, rewrites) for m in range(models)]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool() as pool:
        files = sum(pool.map(_write_model, jobs))
    return time.perf_counter() - started, files, last_day


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def time_publication(layout: StateFolder, *, repeats: int) -> tuple[float, float, float, str]:
    """(first s, median of `repeats` forced rebuilds s, file MB, load average at the end)."""
    started = time.perf_counter()
    publish_results(layout, force=True)
    first = time.perf_counter() - started
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        publish_results(layout, force=True)
        timings.append(time.perf_counter() - started)
    return first, statistics.median(timings), layout.database.stat().st_size / 1e6, _load()


def time_queries(
    layout: StateFolder, last_day: date, *, repeats: int
) -> list[tuple[str, int, list[float], list[float], list[float]]]:
    """Per documented query: (query, rows, then the seconds of each run on results.duckdb
    opened read-only, through `eval-pipeline sql`'s read, and through the views in memory);
    each list's first run is the cold one."""
    results = []
    for label, sql in queries(last_day).items():
        timings, rows = [], 0
        for _ in range(repeats + 1):
            with duckdb.connect(str(layout.database), read_only=True) as connection:
                started = time.perf_counter()
                rows = len(connection.execute(sql).fetchall())
                timings.append(time.perf_counter() - started)
        command = []
        for _ in range(repeats + 1):
            started = time.perf_counter()
            assert head_read_only(layout, sql, SHOWN_ROWS)[2] == rows, label
            command.append(time.perf_counter() - started)
        live = []
        for _ in range(repeats + 1):
            started = time.perf_counter()
            assert len(query(layout, sql)) == rows, label
            live.append(time.perf_counter() - started)
        results.append((label, rows, timings, command, live))
    return results


def print_queries(results: list[tuple[str, int, list[float], list[float], list[float]]]) -> None:
    print(
        f"  {'query (ms: first / median)':<28} {'rows':>9} {'file':>13}"
        f" {'eval-pipeline sql':>18} {'views in memory':>16}"
    )

    def cell(seconds: list[float], width: int) -> str:
        figure = f"{seconds[0] * 1000:.0f} / {statistics.median(seconds[1:]) * 1000:.0f}"
        return f"{figure:>{width}}"

    for label, rows, timings, command, live in results:
        print(f"  {label:<28} {rows:>9,} {cell(timings, 13)} {cell(command, 18)} {cell(live, 16)}")


def print_publication(layout: StateFolder, *, repeats: int) -> None:
    first, median, size, load = time_publication(layout, repeats=repeats)
    print(
        f"  publishing results.duckdb: first {first:.1f} s, median of {repeats} {median:.1f} s;"
        f" {size:.0f} MB; {load} ({os.cpu_count()} cores)"
    )


def check_counts(layout: StateFolder, *, days: int, models: int, cases: int, k: int) -> None:
    with duckdb.connect(str(layout.database), read_only=True) as connection:
        for table, expected in (
            ("grades", days * models * cases * k),
            ("agent_runs", days * models * cases * k),
            ("model_summaries", days * models),
        ):
            found = connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert found == expected, f"{table}: {found:,} rows, expected {expected:,}"


# ---- 2. a rerun of an unchanged partition through Dagster -------------------------------------


@dg.asset
def trivial_a() -> None:
    """Does nothing: three such assets cost what Dagster itself costs for a 3-asset run."""


@dg.asset(deps=[trivial_a])
def trivial_b() -> None:
    """Does nothing."""


@dg.asset(deps=[trivial_b])
def trivial_c() -> None:
    """Does nothing."""


def dagster_rerun(folder: Path, *, repeats: int) -> dict[str, float]:
    with open_small_suite(folder / "suite") as suite, dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        defs = prepare(suite, instance, run_config=QUIET)
        started = time.perf_counter()
        evaluate(defs, instance, MODELS[0], run_config=QUIET)
        first = time.perf_counter() - started
        requests = agent_requests(suite.agent)
        reruns = []
        for _ in range(repeats):
            started = time.perf_counter()
            evaluate(defs, instance, MODELS[0], run_config=QUIET)
            reruns.append(time.perf_counter() - started)
        rerun_requests = agent_requests(suite.agent) - requests

        trivial_defs = dg.Definitions(assets=[trivial_a, trivial_b, trivial_c])
        chain = ["trivial_a", "trivial_b", "trivial_c"]
        materialize(trivial_defs, chain, instance=instance, run_config=QUIET)  # warm up
        baseline = []
        for _ in range(repeats):
            started = time.perf_counter()
            assert materialize(trivial_defs, chain, instance=instance, run_config=QUIET).success
            baseline.append(time.perf_counter() - started)
    return {
        "first": first,
        "first_requests": requests,
        "rerun": statistics.median(reruns),
        "rerun_requests": rerun_requests,
        "trivial": statistics.median(baseline),
        "assets": len(EVALUATION),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument(
        "--rewrites", type=float, default=0.1, help="share of partitions written twice"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--store", type=Path, help="state folder to write (or reuse) the history in"
    )
    parser.add_argument("--skip-dagster", action="store_true")
    parser.add_argument(
        "--compact", action="store_true", help="then compact the store and time the queries again"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="eval-history-") as scratch:
        layout = StateFolder((args.store or Path(scratch) / ".eval").resolve())
        runs = args.days * args.models * args.cases * args.k
        print(
            f"history: {args.days} days × {args.models} models × {args.cases} cases × k={args.k}"
            f" = {runs:,} runs (grades and agent_runs rows), {args.days * args.models:,}"
            f" summaries; {args.rewrites:.0%} of partitions written twice"
        )
        if (layout.tables_dir / "grades").is_dir() and args.store:
            last_day = date.today()
            ensure_database(layout)  # the views of this code version
            print(f"  reusing the history in {layout.root}")
        else:
            seconds, files, last_day = write_history(
                layout,
                days=args.days,
                models=args.models,
                cases=args.cases,
                k=args.k,
                rewrites=args.rewrites,
            )
            size = sum(p.stat().st_size for p in layout.tables_dir.rglob("*.parquet"))
            print(
                f"  written in {seconds:.1f} s: {files:,} Parquet files, {size / 1e6:.0f} MB,"
                f" {runs / seconds:,.0f} runs/s"
            )
        counts = {"days": args.days, "models": args.models, "cases": args.cases, "k": args.k}
        print_publication(layout, repeats=args.repeats)
        check_counts(layout, **counts)
        print(f"\ndocumented queries, target < {TARGET_MS} ms:")
        before = time_queries(layout, last_day, repeats=args.repeats)
        print_queries(before)
        if args.compact:
            started = time.perf_counter()
            # Nothing writes meanwhile, so every file so far is folded (no safety margin).
            report = compact_store(layout, before=datetime.now(UTC))
            seconds = time.perf_counter() - started
            assert report.status == "compacted", report.message
            left = sum(
                "_segments" not in p.parts for p in layout.tables_dir.rglob("[0-9]*.parquet")
            )
            print(f"\ncompacted in {seconds:.1f} s: {report.message}; {left:,} data files left")
            print_publication(layout, repeats=args.repeats)
            check_counts(layout, **counts)
            after = time_queries(layout, last_day, repeats=args.repeats)
            for was, now in zip(before, after, strict=True):
                assert was[1] == now[1], f"{was[0]}: {was[1]} rows before, {now[1]} after"
            print_queries(after)

        if not args.skip_dagster:
            print(
                "\nrerun of an unchanged partition through Dagster (agent_runs, grades, model_summaries):"
            )
            figures = dagster_rerun(Path(scratch), repeats=args.repeats)
            print(
                f"  first materialization   {figures['first']:.2f} s,"
                f" {figures['first_requests']} agent requests"
            )
            print(
                f"  rerun (median)          {figures['rerun']:.2f} s,"
                f" {figures['rerun_requests']} agent requests"
            )
            print(
                f"  3 empty assets (median) {figures['trivial']:.2f} s  (Dagster's own cost of such a run)"
            )
            print(
                f"  rerun / empty run       {figures['rerun'] / figures['trivial']:.1f}×;"
                f" the pipeline's own work: {figures['rerun'] - figures['trivial']:.2f} s"
            )
            assert figures["rerun_requests"] == 0, "an unchanged partition called the agent"


if __name__ == "__main__":
    main()

"""Benchmark building warehouse variants and the semantic check on the sample warehouse.

Run: python benchmarks/variants.py [--warehouse FILE] [--count 8] [--repeats 3]

Without `--warehouse`, the sample suite (tests_suite, 61,607 orders) is copied to a temporary
folder and its warehouse built with `eval-pipeline warehouse`, as a user would (~1 min, not
timed). Then:

1. Build: `build_variants` of `--count` variants, median wall time of `--repeats` builds.
   Target: <= 10 s for 8 variants.
2. Check: for every test of the suite with reference SQL, `semantic_check` with the reference
   as the agent's SQL (so every variant runs both queries and compares: the most work a
   passing test costs), timed per test and divided by the variants; the figure is the median
   over tests of the per-variant time. Target: <= 100 ms. For scale, the same two queries and
   comparison on the warehouse itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from eval_pipeline.grading import build_variants, compare_results, semantic_check
from eval_pipeline.sandbox import SqlSandbox, sql_is_ordered
from eval_pipeline.suite import load_cases

SUITE = Path(__file__).resolve().parents[1] / "tests_suite"
BUILD_TARGET_S, CHECK_TARGET_MS = 10.0, 100.0


def build_sample_warehouse(folder: Path) -> Path:
    """The sample suite copied into `folder` and its warehouse built through the CLI."""
    from eval_pipeline_tests.conftest import copy_sample_suite

    suite = copy_sample_suite(folder / "suite")
    home = folder / "dagster_home"
    home.mkdir()
    subprocess.run(
        ["eval-pipeline", "warehouse", "--suite", str(suite)],
        check=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
    )
    return suite / "warehouse.duckdb"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", type=Path, help="a built warehouse (default: build one)")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="variants-bench-") as tmp:
        folder = Path(tmp)
        warehouse = args.warehouse or build_sample_warehouse(folder)
        print(f"warehouse: {warehouse} ({warehouse.stat().st_size / 1e6:.1f} MB)")

        builds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            variants = build_variants(
                warehouse, folder / "variants", count=args.count, seed=args.seed
            )
            builds.append(time.perf_counter() - started)
        build_s = statistics.median(builds)
        rows = variants.row_counts[0]
        print(
            f"build {args.count} variants: median {build_s:.2f} s of {args.repeats} "
            f"({', '.join(f'{b:.2f}' for b in builds)}); target {BUILD_TARGET_S:.0f} s, "
            f"ratio {build_s / BUILD_TARGET_S:.2f}; {build_s / args.count * 1000:.0f} ms per variant"
        )
        print(
            f"variant 1: {sum(rows.values()):,} rows in {len(rows)} tables "
            f"(orders {rows.get('main.orders', 0):,}); files "
            f"{sum(p.stat().st_size for p in variants.paths) / 1e6:.1f} MB in all"
        )

        started = time.perf_counter()
        sandboxes = variants.open()
        open_ms = (time.perf_counter() - started) * 1000
        base = SqlSandbox.for_file(warehouse)
        cases, _ = load_cases(SUITE)
        cases = [case for case in cases if case.sql]
        per_variant, on_base, outcomes = [], [], {"passed": 0, "failed": 0, "skipped": 0}
        try:
            for case in cases:
                tolerance = case.comparison
                ordered = case.ordered if case.ordered is not None else sql_is_ordered(case.sql)
                compare = partial(
                    compare_results,
                    ordered=ordered,
                    **(
                        {
                            "decimals": tolerance.decimals,
                            "rtol": tolerance.rtol,
                            "atol": tolerance.atol,
                        }
                        if tolerance
                        else {}
                    ),
                )
                started = time.perf_counter()
                check = semantic_check(case.sql, case.sql, sandboxes, compare)
                per_variant.append((time.perf_counter() - started) * 1000 / len(sandboxes))
                outcomes[check.status] += 1
                if check.status == "failed":
                    print(f"  unexpected: {case.name}: {check.message}")
                started = time.perf_counter()
                expected = base.execute(case.sql)
                actual = base.execute(case.sql)
                compare(_frame(actual), _frame(expected))
                on_base.append((time.perf_counter() - started) * 1000)
        finally:
            for sandbox in [base, *sandboxes]:
                sandbox.close()
        check_ms = statistics.median(per_variant)
        base_ms = statistics.median(on_base)
        print(f"open {len(sandboxes)} variant sandboxes: {open_ms:.0f} ms (once per process)")
        print(
            f"semantic check, {len(cases)} tests: median {check_ms:.1f} ms per variant "
            f"(p90 {_quantile(per_variant, 0.9):.1f}, max {max(per_variant):.1f}); target "
            f"{CHECK_TARGET_MS:.0f} ms, ratio {check_ms / CHECK_TARGET_MS:.2f}; "
            f"{check_ms * len(sandboxes):.0f} ms per test for {len(sandboxes)} variants"
        )
        print(
            f"same two queries + comparison on the warehouse: median {base_ms:.1f} ms; "
            f"a variant costs {check_ms / base_ms:.2f}x that"
        )
        print(f"outcomes (reference vs itself): {outcomes}")
    return 0


def _frame(result):
    from eval_pipeline.grading import frame_from_rows

    return frame_from_rows(list(result.columns), [list(r) for r in result.rows])


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())

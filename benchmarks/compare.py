"""Benchmark compare_results against a straightforward pandas comparison (nao's method).

Run: python benchmarks/compare.py [--rows 1000000] [--repeats 5]

Three scenarios, each on a seeded table of int, float, string, timestamp, bool and nullable
float columns: the actual result is the expected one with its rows shuffled and float noise
far inside the tolerance; the same with values sitting on rounding boundaries (so noise flips
the rounding and the tolerant path has to decide); and one differing cell. Timings are
medians of several repeats. Peak memory is measured per scenario in a fresh subprocess as the
rise of the resident set size's high-water mark (Linux VmHWM, reset through
/proc/self/clear_refs just before the call) over the resident size before it, relative to the
two inputs' `memory_usage(deep=True)`; where clear_refs is unavailable it falls back to
tracemalloc, which misses pyarrow's allocations.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from eval_pipeline.grading import compare_results

SCENARIOS = ("noise", "rounding-boundary", "one-cell-differs")
SEED = 20240101


def make_inputs(rows: int, scenario: str, seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An expected table and an actual one that should pass (or fail, for one-cell-differs)."""
    rng = np.random.default_rng(seed)
    revenue = rng.gamma(2.0, 500.0, rows)
    discount = rng.uniform(0, 0.3, rows)
    if scenario == "rounding-boundary":  # every value ends in 5 at the third decimal
        revenue = np.floor(revenue * 100) / 100 + 0.005
        discount = np.floor(discount * 100) / 100 + 0.005
    discount[rng.random(rows) < 0.1] = np.nan
    names = np.array([f"customer_{k:05d}" for k in range(10_000)], dtype=object)
    start = np.datetime64("2023-01-01T00:00:00", "s").astype(np.int64)
    expected = pd.DataFrame(
        {
            "customer_id": rng.integers(0, max(1, rows // 4), rows),
            "revenue": revenue,
            "segment": pd.Series(names[rng.integers(0, len(names), rows)]).astype("str"),
            "ordered_at": pd.to_datetime(start + rng.integers(0, 365 * 86_400, rows), unit="s"),
            "is_active": rng.random(rows) < 0.5,
            "discount": discount,
        }
    )
    actual = expected.sample(frac=1.0, random_state=seed + 1).reset_index(drop=True)
    for column in ("revenue", "discount"):
        actual[column] = actual[column] + rng.uniform(-1e-9, 1e-9, rows)
    if scenario == "one-cell-differs":
        actual.loc[rows // 2, "revenue"] += 1.0
    return actual, expected


def baseline_equal(
    actual: pd.DataFrame,
    expected: pd.DataFrame,
    decimals: int = 2,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> bool:
    """nao's comparison: normalise, sort by all columns, equals, then allclose on numbers."""

    def normalise(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.reset_index(drop=True)
        frame = frame[sorted(frame.columns)]
        floats = frame.select_dtypes("float").columns
        frame[floats] = frame[floats].round(decimals)
        return frame.sort_values(list(frame.columns)).reset_index(drop=True)

    a, e = normalise(actual), normalise(expected)
    if a.shape != e.shape or list(a.columns) != list(e.columns):
        return False
    if a.equals(e):
        return True
    numeric = e.select_dtypes("number").columns.difference(e.select_dtypes("bool").columns)
    others = [c for c in e.columns if c not in numeric]
    if not a[others].equals(e[others]):
        return False
    return bool(
        np.allclose(
            a[numeric].to_numpy(float), e[numeric].to_numpy(float), rtol, atol, equal_nan=True
        )
    )


def _median_seconds(function, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_memory(rows: int, scenario: str, which: str) -> dict:
    """Peak extra memory of one call, in this process (run it in a fresh one)."""
    actual, expected = make_inputs(rows, scenario)
    inputs = int(actual.memory_usage(deep=True).sum() + expected.memory_usage(deep=True).sum())
    function = compare_results if which == "compare_results" else baseline_equal
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        before = _rss_kib("VmRSS")
        function(actual, expected)
        peak = (_rss_kib("VmHWM") - before) * 1024
        method = "RSS high-water mark"
    except OSError:
        tracemalloc.start()
        function(actual, expected)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        method = "tracemalloc"
    return {"inputs": inputs, "peak": peak, "method": method}


def _memory_in_subprocess(rows: int, scenario: str, which: str) -> dict:
    command = [sys.executable, __file__, "--rows", str(rows), "--memory-probe", scenario, which]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument(
        "--memory-probe", nargs=2, metavar=("SCENARIO", "FUNCTION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.memory_probe:
        print(json.dumps(measure_memory(args.rows, *args.memory_probe)))
        return

    print(f"rows={args.rows:,} columns=6 repeats={args.repeats} (medians)")
    header = f"{'scenario':<18} {'compare_results':>16} {'baseline':>10} {'speed-up':>9} {'passed':>12} {'peak mem / inputs':>18}"
    print(header)
    for scenario in args.scenarios:
        actual, expected = make_inputs(args.rows, scenario)
        ours, comparison = _median_seconds(
            lambda a=actual, e=expected: compare_results(a, e), args.repeats
        )
        theirs, baseline = _median_seconds(
            lambda a=actual, e=expected: baseline_equal(a, e), args.repeats
        )
        del actual, expected
        gc.collect()
        memory = _memory_in_subprocess(args.rows, scenario, "compare_results")
        ratio = memory["peak"] / memory["inputs"]
        print(
            f"{scenario:<18} {ours:>15.3f}s {theirs:>9.3f}s {theirs / ours:>8.1f}x "
            f"{f'{comparison.passed}/{baseline}':>12} {ratio:>17.2f}x"
        )
        print(f"{'':<18} message: {comparison.message[:100]}")
    print(f"memory: {memory['method']}; inputs {memory['inputs'] / 2**20:.0f} MiB for both frames")


if __name__ == "__main__":
    main()

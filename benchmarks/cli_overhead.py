"""Benchmark the fixed cost of `eval-pipeline test` and how several models share one invocation.

Run: python benchmarks/cli_overhead.py [--repeats 3] [--only baseline,tiny,sample,models]
         [--tests 100] [--models 3] [--latency-ms 1000] [--threads 32]

Every figure is the wall time of the real console script in a subprocess (medians of
`--repeats`), with the agent served by the scripted OpenAI-compatible server of the tests in
its own process (a real provider is another machine). Ratios are to figures measured in the
same run, so a loaded machine changes them less than the seconds:

* baseline: `python -c "import dagster, duckdb, pandas"`, the least any command can cost;
* tiny: a 1-test suite without a dbt project, a fresh run (new folder) and an unchanged rerun,
  each as a multiple of the baseline (targets ≤ 2.5× and ≤ 1.5×); an unchanged rerun answers
  from the store, so the same rerun without that shortcut (its record of the last evaluation
  removed, as another writer would end it) is printed too; each command's Dagster record,
  written by a process of its own after the command ends, is waited for between measurements
  and timed apart;
* sample: the sample suite `tests_suite/` copied to a temp folder, built once, then an
  unchanged rerun (target ≤ 3 s on an idle machine), and the unchanged rerun of one of its
  tests (`-s`), which the other tests' error runs must not send through Dagster (target
  ≤ 1.5× baseline);
* models: M models × N tests, the agent answering each run in one completion after
  `latency`, `threads` runs in flight per model. fixed = the tiny fresh run;
  ideal = runs × latency / threads (the models one after another would need M times the
  one-model time); the ratio (wall − fixed) / ideal (target ≤ 1.2) is printed with the
  ideal of models evaluated at once too.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipeline.pipeline._unchanged import (  # noqa: E402  # the unit itself: the shortcut's stamp, removed
    STAMP_FILE,
)
from eval_pipeline_tests.agents.servers import ServerProcess, answer, by_turn  # noqa: E402
from eval_pipeline_tests.agents.tiny_suite import write_suite  # noqa: E402
from eval_pipeline_tests.cli.console import wait_for_record  # noqa: E402
from eval_pipeline_tests.conftest import copy_sample_suite  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
PROVIDER = "bench"
DAY = "2026-03-02"


def one_answer():
    """Every run is one completion, the answer."""
    return by_turn(answer("The revenue is 540 USD."))


#: A test of the sample suite that passes, for the inner loop on one test.
SELECTED = "cancelled_orders_query_is_right"


def env() -> dict[str, str]:
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def timed(args: list[str], cwd: Path, *, check: bool = True) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if check and done.returncode not in (0, 1):  # 1: a test failed, still a full evaluation
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall


#: Seconds from each command's end until its Dagster record was in the instance.
RECORDED_AFTER: list[float] = []
#: The CPU seconds each command's recorder process used, as its log says.
RECORDER_CPU: list[float] = []
RECORDER_CPU_LINE = re.compile(r"the recorder used ([0-9.]+) s of CPU")


def cli_test(suite: Path, *extra: str) -> float:
    """The command's wall time. Its Dagster record, which a process of its own writes after
    it ends, is waited for before the next measurement (so no two overlap) and timed apart."""
    wall = timed([str(SCRIPT), "test", "-q", "--date", DAY, *extra], suite)
    if (recorded := wait_for_record(suite)) is not None:
        RECORDED_AFTER.append(recorded)
        log = suite / ".eval" / "logs" / "eval-pipeline-record.log"
        if found := RECORDER_CPU_LINE.findall(log.read_text(encoding="utf-8")):
            RECORDER_CPU.append(float(found[-1]))
    return wall


def median_of(repeats: int, measure: Callable[[int], float]) -> float:
    walls = [measure(i) for i in range(repeats)]
    return statistics.median(walls)


def tiny_suite(folder: Path, base_url: str, tests: int, threads: int = 4) -> Path:
    return write_suite(
        folder,
        cases={f"t{i:03d}": f"Question {i}: what is the revenue?" for i in range(tests)},
        providers=[{"provider": PROVIDER, "base_url": base_url, "timeout_s": 60}],
        threads=threads,
        dbt=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="baseline,tiny,sample,models")
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--threads", type=int, default=32)
    options = parser.parse_args(argv)
    parts = set(options.only.split(","))
    repeats = options.repeats
    model = f"{PROVIDER}:model-0"
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start")

    work = Path(tempfile.mkdtemp(prefix="cli_overhead_"))
    try:
        baseline = median_of(
            repeats,
            lambda _: timed([sys.executable, "-c", "import dagster, duckdb, pandas"], work),
        )
        print(f"import baseline (dagster, duckdb, pandas): {baseline:.2f} s")

        fresh = None
        if parts & {"tiny", "models"}:
            with ServerProcess(one_answer) as base_url:

                def fresh_run(i: int) -> float:
                    suite = tiny_suite(work / f"tiny-fresh-{i}", base_url, 1)
                    return cli_test(suite, "-m", model)

                fresh = median_of(repeats, fresh_run)
                suite = tiny_suite(work / "tiny", base_url, 1)
                cli_test(suite, "-m", model)
                rerun = median_of(repeats, lambda _: cli_test(suite, "-m", model))
                stamp = suite / ".eval" / "dagster_home" / STAMP_FILE

                def without_shortcut(_: int) -> float:
                    stamp.unlink()  # as after another writer: the unchanged model is skipped
                    return cli_test(suite, "-m", model)

                pipeline = median_of(repeats, without_shortcut)
            print(
                f"1-test suite: fresh run {fresh:.2f} s = {fresh / baseline:.2f}× baseline "
                f"(target ≤ 2.5), unchanged rerun {rerun:.2f} s = {rerun / baseline:.2f}× "
                f"baseline (target ≤ 1.5); the same rerun without the command's shortcut "
                f"(as after another writer) {pipeline:.2f} s = {pipeline / baseline:.2f}×"
            )

        if "sample" in parts:
            suite = copy_sample_suite(work / "sample")
            first = cli_test(suite)
            rerun = median_of(repeats, lambda _: cli_test(suite))
            print(
                f"sample suite: first run (dbt build) {first:.2f} s, unchanged rerun "
                f"{rerun:.2f} s = {rerun / baseline:.2f}× baseline (target ≤ 3 s idle)"
            )
            # The inner loop on one test: its unchanged rerun is decided by its own runs,
            # whatever the suite's other tests hold (the sample's fault-injection tests end
            # in error runs, which every full rerun retries).
            one = ["-s", SELECTED]
            cli_test(suite, *one)
            again = median_of(repeats, lambda _: cli_test(suite, *one))
            print(
                f"sample suite, one test (-s {SELECTED}): unchanged rerun {again:.2f} s = "
                f"{again / baseline:.2f}× baseline (target ≤ 1.5)"
            )

        if "models" in parts:
            latency = options.latency_ms / 1000
            models = [f"{PROVIDER}:model-{i}" for i in range(options.models)]
            flags = [arg for m in models for arg in ("-m", m)]
            runs = options.tests * options.models
            ideal = runs * latency / options.threads
            with ServerProcess(one_answer, latency_s=latency) as base_url:

                def batch(i: int) -> float:
                    suite = tiny_suite(
                        work / f"models-{i}", base_url, options.tests, threads=options.threads
                    )
                    return cli_test(suite, *flags, "--no-cache")

                wall = median_of(repeats, batch)
            assert fresh is not None
            at_once = options.tests * latency / options.threads
            print(
                f"{options.models} models × {options.tests} tests at {latency:g} s, "
                f"{options.threads} threads: wall {wall:.2f} s, fixed {fresh:.2f} s, "
                f"ideal {ideal:.2f} s → (wall − fixed)/ideal {(wall - fresh) / ideal:.2f} "
                f"(target ≤ 1.2); models at once would ideally need {at_once:.2f} s → "
                f"{(wall - fresh) / at_once:.2f}"
            )
        if RECORDED_AFTER:
            print(
                "each command's Dagster record, written in the background once it ended, was "
                f"in the instance {statistics.median(RECORDED_AFTER):.2f} s after (median of the "
                f"{len(RECORDED_AFTER)} commands that left one; not part of the times above)"
            )
        if RECORDER_CPU:
            print(
                f"the recorder process used {statistics.median(RECORDER_CPU):.2f} s of CPU "
                f"(median; {min(RECORDER_CPU):.2f}–{max(RECORDER_CPU):.2f} s), importing Dagster "
                "and its storage included, on another core while the stages ran"
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

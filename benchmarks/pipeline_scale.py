"""Benchmark `eval-pipeline test` at scale: N tests × M models against an instant model.

Run: python benchmarks/pipeline_scale.py [--tests 500] [--models 3] [--threads 16]
         [--repeats 3] [--latency-ms 0] [--baseline CHECKOUT]

Every test is a question with reference SQL on the small DuckDB shop warehouse of the tests
(`count(*)` of the orders up to some id, so the references differ). The agent is the built-in
one on an OpenAI-compatible provider declared under `llm: providers:`, served by the scripted
test server in its own process (a real provider is another machine): each run is one
`execute_sql` tool call with the right query, then the final answer. The real console script
runs in a subprocess, as a user runs it, on a fresh copy of the suite (a fresh store) each
repeat. Printed:

* wall time (median of `--repeats`), runs/s and ms per run;
* the latency-only ideal, runs × 2 completions × latency / runs in flight (threads × the
  models evaluated at once, at most 4): 0 s with an instant model, so every second is ours; the fixed cost is measured instead, as the same command on
  a 1-test suite, and the marginal ms per run is (wall − fixed) / runs;
* the CPU seconds (user + system) of the command's whole process tree: `os.wait4` of the
  command (which waits for the worker processes it forked), and of the server its workers
  are forked from when it cannot fork them itself (multiprocessing's forkserver, which
  waits for them), adopted here as a subreaper once the command ends; CPU seconds move far
  less with the machine's load than wall seconds;
* the peak memory of the tree: the sum of the proportional set sizes (PSS) of its
  processes, sampled every 0.25 s (pages the workers share with the server they are forked
  from count once), beside the largest RSS of any one process;
* with `--baseline CHECKOUT`, the median wall, CPU and memory of that checkout's code run
  on the same suite between this code's runs (alternating which goes first), and the ratios;
* the load average beside every figure, and pass/fail against the targets docs/performance.md sets:
  ≤ 5 ms of wall and ≤ 3 ms of CPU per run beyond the fixed cost, 1,500 runs ≤ 12 s in all,
  peak memory ≤ 450 MB, and with a model's latency (`--latency-ms`) a wall time ≤ 1.5× the
  latency-only ideal.

Memory that does not grow with the evaluation is checked by two runs of this script, at 500
and at 5,000 tests (1,500 and 15,000 runs): the peaks should differ by ≤ 10 %.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipeline.pipeline._direct import (  # noqa: E402  # the unit itself: the runner's concurrency
    MODELS_AT_ONCE,
)
from eval_pipeline_tests.agents.servers import (  # noqa: E402
    RecordedRequest,
    ServerProcess,
    Step,
    answer,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import ORDERS, prompt_of, write_suite  # noqa: E402
from eval_pipeline_tests.cli.console import children, cmdline, wait_for_record  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
PROVIDER = "bench"
DAY = "2026-03-02"
COMPLETIONS_PER_RUN = 2
TARGET_MS_PER_RUN = 5.0
TARGET_CPU_MS_PER_RUN = 3.0
TARGET_WALL_AT_1500 = 12.0
TARGET_RSS_MB = 450.0
TARGET_LATENCY_RATIO = 1.5
_LIMIT = re.compile(r"order_id <= (\d+)")


def reference_sql(i: int) -> str:
    return f"SELECT count(*) AS n FROM orders WHERE order_id <= {1 + i % len(ORDERS)}"


def question(i: int) -> str:
    return f"Question {i}: how many orders have an id up to {1 + i % len(ORDERS)}?"


def right_answers():
    """The script of every conversation: the test's own query, then its right answer."""

    def choose(request: RecordedRequest, _index: int) -> Step:
        limit = int(re.search(r"up to (\d+)", prompt_of(request)).group(1))
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        sql = f"SELECT count(*) AS n FROM orders WHERE order_id <= {limit}"
        return tool_calls(execute_sql(sql)) if turn == 0 else answer(f"There are {limit} orders.")

    return choose


def env(code: Path | None = None) -> dict[str, str]:
    """The command's environment; `code`: a checkout whose `eval_pipeline` it runs instead of
    this one's (ahead of the installed package on the import path)."""
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE", "PYTHONPATH"}
    kept = {k: v for k, v in os.environ.items() if k not in drop}
    return kept | ({"PYTHONPATH": str(code)} if code is not None else {})


def load() -> str:
    return "load " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def make_suite(folder: Path, base_url: str, tests: int, threads: int) -> Path:
    return write_suite(
        folder,
        cases={f"t{i:04d}": {"prompt": question(i), "sql": reference_sql(i)} for i in range(tests)},
        providers=[{"provider": PROVIDER, "base_url": base_url, "timeout_s": 60}],
        threads=threads,
        dbt=False,
    )


def tree(pid: int) -> list[int]:
    """`pid` and its descendants, but the command's Dagster recorder: not its work."""
    found, stack = [], [pid]
    while stack:
        process = stack.pop()
        if b"eval_pipeline.defs.record" in cmdline(process):
            continue
        found.append(process)
        stack += children(process)
    return found


def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakMemory(threading.Thread):
    """The largest sum of PSS over the process tree of `pid`, sampled until `stop`."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self._stop_sampling = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._stop_sampling.wait(0.25):
            self.peak_kb = max(self.peak_kb, sum(pss_kb(p) for p in tree(self.pid)))

    def stop(self) -> float:
        self._stop_sampling.set()
        self.join()
        return self.peak_kb / 1024


def become_subreaper() -> None:
    """Orphans of the command (the server of its workers outlives it by a moment) become
    this process's children, so their CPU can be waited for and counted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def run_cli(
    suite: Path, models: list[str], threads: int, code: Path | None = None
) -> tuple[float, float, float, float]:
    """One `eval-pipeline test` (of the checkout `code`, else this one): wall seconds, CPU
    seconds (user + system) of its process tree, its peak memory (sum of PSS) and the
    largest RSS of one of its processes, in MB."""
    flags = [arg for m in models for arg in ("-m", m)]
    args = [str(SCRIPT), "test", "-q", "--date", DAY, "-t", str(threads), *flags]
    before = set(children(os.getpid()))
    started = time.perf_counter()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        process = subprocess.Popen(args, cwd=suite, env=env(code), stdout=out, stderr=err)
        memory = PeakMemory(process.pid)
        memory.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        peak = memory.stop()
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    if process.returncode != 0:
        raise SystemExit(
            f"{' '.join(args)} exited {process.returncode}:\n{stdout[-2000:]}\n{stderr[-3000:]}"
        )
    cpu = usage.ru_utime + usage.ru_stime
    largest = usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux
    # The workers' server (and multiprocessing's resource tracker), adopted once the command
    # ended: each is waited for, with the workers the server waited for.
    for orphan in set(children(os.getpid())) - before:
        if b"multiprocessing" in cmdline(orphan):
            _, _, adopted = os.wait4(orphan, 0)
            cpu += adopted.ru_utime + adopted.ru_stime
            largest = max(largest, adopted.ru_maxrss / 1024)
    # Its Dagster record, written in the background once it ended: not part of its figures,
    # and never overlapping the next command's.
    if (recorded := wait_for_record(suite)) is not None:
        print(f"  (its Dagster record was in the instance {recorded:.1f} s after it ended)")
    for orphan in set(children(os.getpid())) - before:  # the recorder, adopted: reaped
        if b"eval_pipeline.defs.record" in cmdline(orphan):
            os.waitpid(orphan, 0)
    return wall, cpu, peak, largest


def run_baseline(
    template: Path, work: Path, repeat: int, models: list[str], options: argparse.Namespace
) -> tuple[float, float, float]:
    """One run of the baseline's code on a fresh copy of the suite: wall, CPU, peak memory."""
    suite = Path(shutil.copytree(template, work / f"baseline-{repeat}"))
    wall, cpu, peak, _ = run_cli(suite, models, options.threads, options.baseline)
    print(f"  baseline {repeat + 1}: {wall:.2f} s, CPU {cpu:.1f} s, peak memory {peak:.0f} MB")
    return wall, cpu, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="per completion")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another revision (`git worktree add /tmp/base REV`): each repeat "
        "also runs its code on the same suite, alternating which goes first, and the medians "
        "of both and their ratios are printed (the machine's speed drifts between minutes; "
        "interleaved, both see the same drift)",
    )
    options = parser.parse_args(argv)
    models = [f"{PROVIDER}:model-{i}" for i in range(options.models)]
    runs = options.tests * options.models
    latency = options.latency_ms / 1000
    # Each model has `threads` runs in flight, and up to MODELS_AT_ONCE models run at once.
    in_flight = options.threads * min(options.models, MODELS_AT_ONCE)
    ideal = runs * COMPLETIONS_PER_RUN * latency / in_flight
    print(
        f"{options.tests} tests × {options.models} models = {runs} runs, -t {options.threads}, "
        f"{COMPLETIONS_PER_RUN} completions a run at {options.latency_ms:g} ms; "
        f"{os.cpu_count()} CPUs, {load()}"
    )
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="pipeline_scale_"))
    try:
        with ServerProcess(right_answers, latency_s=latency) as base_url:
            fixed_suite = make_suite(work / "template-1", base_url, 1, options.threads)
            big_suite = make_suite(work / "template-n", base_url, options.tests, options.threads)
            fixed_walls, fixed_cpus, walls, cpus, peaks, largest = [], [], [], [], [], []
            for repeat in range(options.repeats):
                suite = Path(shutil.copytree(fixed_suite, work / f"fixed-{repeat}"))
                wall, cpu, _, _ = run_cli(suite, models, options.threads)
                fixed_walls.append(wall)
                fixed_cpus.append(cpu)
                print(
                    f"  fixed (1 test × {options.models} models): {wall:.2f} s, CPU {cpu:.1f} s, "
                    f"{load()}"
                )
            baseline: list[tuple[float, float, float]] = []
            for repeat in range(options.repeats):
                if options.baseline is not None and repeat % 2 == 1:
                    baseline.append(run_baseline(big_suite, work, repeat, models, options))
                suite = Path(shutil.copytree(big_suite, work / f"run-{repeat}"))
                wall, cpu, peak, rss = run_cli(suite, models, options.threads)
                walls.append(wall)
                cpus.append(cpu)
                peaks.append(peak)
                largest.append(rss)
                print(
                    f"  repeat {repeat + 1}: {wall:.2f} s, {runs / wall:.0f} runs/s, "
                    f"{wall / runs * 1000:.2f} ms/run, CPU {cpu:.1f} s, peak memory "
                    f"{peak:.0f} MB (largest process {rss:.0f} MB RSS), {load()}"
                )
                if options.baseline is not None and repeat % 2 == 0:
                    baseline.append(run_baseline(big_suite, work, repeat, models, options))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall = statistics.median(walls)
    fixed = statistics.median(fixed_walls)
    peak = max(peaks)
    cpu, fixed_cpu = statistics.median(cpus), statistics.median(fixed_cpus)
    marginal = (wall - fixed) / runs * 1000
    print(
        f"median wall {wall:.2f} s for {runs} runs: {runs / wall:.1f} runs/s, "
        f"{wall / runs * 1000:.2f} ms/run in all, {marginal:.2f} ms/run beyond the fixed cost "
        f"{fixed:.2f} s"
    )
    # CPU seconds depend far less on the machine's load than wall seconds do: compare them too.
    print(
        f"median CPU of the command {cpu:.1f} s ({(cpu - fixed_cpu) / runs * 1000:.2f} ms/run "
        f"beyond the fixed {fixed_cpu:.1f} s)"
    )
    if ideal > 0:
        print(f"latency-only ideal {ideal:.2f} s: ratio wall/ideal {wall / ideal:.2f}")
    else:
        print(
            "latency-only ideal 0 s (the model answers instantly): the ratio is unbounded, so "
            f"the fixed cost ({fixed:.2f} s, a 1-test run) and ms/run stand in for it"
        )
    print(
        f"peak memory of the command's process tree {peak:.0f} MB, sum of PSS (max over "
        f"repeats; largest single process {max(largest):.0f} MB RSS)"
    )
    if baseline:
        base_wall = statistics.median(w for w, _, _ in baseline)
        base_cpu = statistics.median(c for _, c, _ in baseline)
        print(
            f"baseline {options.baseline}: median wall {base_wall:.2f} s, CPU {base_cpu:.1f} s, "
            f"peak memory {max(m for _, _, m in baseline):.0f} MB; this code / baseline: wall "
            f"{wall / base_wall:.2f}, CPU {cpu / base_cpu:.2f}"
        )
    cpu_marginal = (cpu - fixed_cpu) / runs * 1000
    checks = [
        (f"ms/run beyond the fixed cost ≤ {TARGET_MS_PER_RUN:g}", marginal <= TARGET_MS_PER_RUN),
        (
            f"CPU ms/run beyond the fixed cost ≤ {TARGET_CPU_MS_PER_RUN:g}",
            cpu_marginal <= TARGET_CPU_MS_PER_RUN,
        ),
        (f"peak memory ≤ {TARGET_RSS_MB:g} MB", peak <= TARGET_RSS_MB),
    ]
    if ideal > 0:
        checks.append(
            (
                f"wall / latency-only ideal ≤ {TARGET_LATENCY_RATIO:g}",
                wall / ideal <= TARGET_LATENCY_RATIO,
            )
        )
    if runs == 1500:
        checks.append((f"1,500 runs ≤ {TARGET_WALL_AT_1500:g} s", wall <= TARGET_WALL_AT_1500))
    for name, ok in checks:
        print(f"  {'PASS' if ok else 'FAIL'}: {name}")
    print(f"{load()} at the end, {os.cpu_count()} CPUs")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

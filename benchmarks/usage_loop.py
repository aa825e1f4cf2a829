"""Benchmark the online loop on a generated month of production traces: ingestion time and memory, and whether the planted friction leads the recommendations.

Run: python benchmarks/usage_loop.py [--conversations 10000] [--repeats 3] [--seed 7]

The traces are generated (`eval_pipeline_tests/usage/production.py`; no real user wrote
them): OpenTelemetry GenAI spans in OTLP/JSON as a collector's file exporter writes them, a
month of conversations by 200 users on 3 models, with eight clusters of friction planted
among them (two tool errors, negative feedback, two kinds of correction, answers that disagree
across days, questions the agent could not answer, a question no test asks) and noise of
every kind (one-off errors, scattered votes, off-topic questions). Printed:

* ingestion: the wall time of `eval-pipeline usage import` (the real console script, in a
  fresh suite each repeat; median), conversations per second, and the peak RSS of the
  command (target: ≤ 10 s for 10,000 conversations);
* `eval-pipeline recommend --format json`: its wall time, the share of planted clusters found
  in the top 10 with the right kind and file (target ≥ 90 %), and the top-10 entries that
  match no planted cluster (target ≤ 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipeline_tests.usage.production import PLANTED, write_month, write_project  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")


def timed(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB and stdout of one command."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(args)} exited {code}:\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024, stdout


def matches(planted, item: dict) -> bool:
    return (
        item["kind"] == planted.kind
        and item["file"] == planted.file
        and len(item["conversations"]) >= 0.9 * planted.conversations
        and (
            planted.table is None or planted.table in item["tables"] or planted.kind == "correction"
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="usage-loop-"))
    try:
        traces = write_month(work / "traces.jsonl", options.conversations, seed=options.seed)
        size = traces.stat().st_size / 1e6
        print(
            f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {options.conversations:,} "
            f"generated conversations, {size:.0f} MB of OTLP/JSON"
        )
        walls, peaks, recommend_walls = [], [], []
        top: list[dict] = []
        for repeat in range(options.repeats):
            project = write_project(work / f"project-{repeat}")
            wall, peak, out = timed([str(SCRIPT), "usage", "import", str(traces)], project)
            walls.append(wall)
            peaks.append(peak)
            print(f"  import {repeat + 1}: {wall:.2f} s, peak RSS {peak:.0f} MB — {out.strip()}")
            wall, _, out = timed([str(SCRIPT), "recommend", "--format", "json"], project)
            recommend_walls.append(wall)
            top = json.loads(out)[:10]
        ingest = statistics.median(walls)
        rate = options.conversations / ingest
        target = 10.0 * options.conversations / 10_000
        print(
            f"ingestion: {ingest:.2f} s median ({rate:,.0f} conversations/s), peak RSS "
            f"{max(peaks):.0f} MB — target ≤ {target:.1f} s: {'met' if ingest <= target else 'MISSED'}"
        )
        found = [p.name for p in PLANTED if any(matches(p, item) for item in top)]
        false = [item for item in top if not any(matches(p, item) for p in PLANTED)]
        share = len(found) / len(PLANTED)
        print(
            f"recommend: {statistics.median(recommend_walls):.2f} s median; planted clusters in "
            f"the top 10 with the right kind and file: {len(found)}/{len(PLANTED)} = {share:.0%} "
            f"(target ≥ 90 %: {'met' if share >= 0.9 else 'MISSED'}); top-10 entries matching "
            f"no planted cluster: {len(false)} (target ≤ 2: {'met' if len(false) <= 2 else 'MISSED'})"
        )
        for rank, item in enumerate(top, start=1):
            planted = next((p.name for p in PLANTED if matches(p, item)), "not planted")
            print(
                f"  {rank:>2}. {item['kind']:<17} {item['score']:>8.2f} "
                f"{len(item['conversations']):>4} conv. → {item['file']}  ({planted})"
            )
        missing = [p.name for p in PLANTED if p.name not in found]
        if missing:
            print(f"  not in the top 10: {', '.join(missing)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

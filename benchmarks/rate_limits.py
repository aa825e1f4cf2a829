"""Benchmark `eval-pipeline test` against a provider that enforces a requests-per-minute limit.

Run: python benchmarks/rate_limits.py [--tests 300] [--threads 32] [--per-minute 600]
         [--start 100] [--protocol openai|anthropic] [--no-headers] [--baseline CHECKOUT]

The provider is the scripted test server (OpenAI Chat Completions, or Anthropic Messages)
behind a token bucket as OpenAI and Anthropic describe theirs: it holds at most `--per-minute`
requests, refills continuously at that rate, and holds `--start` at first (a limit partly used
already). A request the bucket covers is answered (one `execute_sql` call, then the answer:
two requests a run); any other gets a 429 with `retry-after`, and every answer carries the
provider's rate-limit headers (`--no-headers`: only `retry-after`). The real console script
runs the suite in a subprocess, as a user runs it. Printed, for this code and with
`--baseline` for another checkout's on the same suite:

* runs completed and runs in error;
* requests answered and refused (429), and the refused share (target ≤ 1 %);
* wall time against the ideal — the requests the bucket did not hold at first, at the
  limit's rate — and their ratio, the share of the allowed throughput reached (target ≥ 90 %).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipeline_tests.agents.rate_limits import RateLimit  # noqa: E402
from eval_pipeline_tests.agents.servers import ScriptedServer  # noqa: E402
from eval_pipeline_tests.agents.tiny_suite import ROUTINE, write_suite  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
DAY = "2026-03-02"
REQUESTS_PER_RUN = 2
TARGET_THROUGHPUT = 0.90
TARGET_REFUSED = 0.01


def environment(code: Path | None) -> dict[str, str]:
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE", "PYTHONPATH"}
    kept = {k: v for k, v in os.environ.items() if k not in drop}
    return kept | ({"PYTHONPATH": str(code)} if code is not None else {}) | {"BENCH_KEY": "sk-x"}


def measure(options: argparse.Namespace, work: Path, code: Path | None, label: str) -> bool:
    """One evaluation of a fresh suite by `code` (None: this checkout); prints its figures
    and returns whether they meet the targets."""
    limit = RateLimit(
        ROUTINE,
        per_minute=options.per_minute,
        start=options.start,
        protocol=options.protocol,
        headers=not options.no_headers,
    )
    with ScriptedServer(options.protocol, script=limit, keep_requests=False) as server:
        provider = {
            "provider": "bench",
            "protocol": options.protocol,
            "base_url": server.base_url,
            "api_key": "{{ env('BENCH_KEY') }}",
            "timeout_s": 60,
        }
        suite = write_suite(
            work / label,
            cases={f"t{i:04d}": f"Question {i}: how many orders?" for i in range(options.tests)},
            providers=[provider],
            threads=options.threads,
        )
        started = time.monotonic()
        done = subprocess.run(
            [str(SCRIPT), "test", "-m", "bench:gpt-4.1", "--date", DAY, "--format", "json"],
            cwd=suite,
            env=environment(code),
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - started
    try:
        statuses = [r["status"] for r in json.loads(done.stdout)["results"]]
    except (ValueError, KeyError):
        print(f"{label}: the command failed (exit {done.returncode}): {done.stderr[-600:]}")
        return False
    requests = limit.answered + limit.refused
    refused = limit.refused / requests if requests else 0.0
    beyond = max(0.0, options.tests * REQUESTS_PER_RUN - options.start)
    ideal = beyond / (options.per_minute / 60)
    throughput = ideal / wall if wall else 0.0
    print(
        f"{label}: {statuses.count('passed') + statuses.count('failed')} of {len(statuses)} runs "
        f"completed, {statuses.count('error')} in error; {requests} requests, {limit.refused} "
        f"answered 429 ({refused:.1%}, target ≤ {TARGET_REFUSED:.0%}); {wall:.1f} s against an "
        f"ideal {ideal:.1f} s: {throughput:.0%} of the allowed throughput (target ≥ "
        f"{TARGET_THROUGHPUT:.0%}); load {'/'.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    for line in done.stderr.splitlines():
        if "set the pace" in line:
            print(f"  {line.strip()}")
    complete = statuses.count("error") == 0
    return complete and refused <= TARGET_REFUSED and throughput >= TARGET_THROUGHPUT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--per-minute", type=float, default=600)
    parser.add_argument("--start", type=float, default=100)
    parser.add_argument("--protocol", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--no-headers", action="store_true")
    parser.add_argument("--baseline", type=Path, help="another checkout, run on the same suite")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-rate-limits-"))
    try:
        met = measure(options, work, None, "this code")
        if options.baseline is not None:
            measure(options, work, options.baseline.resolve(), f"baseline {options.baseline}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if met else "FAIL", "on the targets")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

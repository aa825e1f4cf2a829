"""Re-key a hand-written recording: write into each line the hash of the request it answers.

Run: python benchmarks/rekey_recording.py [SUITE] [RECORDING ...] [-k K]
     (defaults: tests_suite, and every recording the suite's models and judge replay)

A replay answers only the request a line was recorded for (`request`: a hash of the messages
and tools). `--record` writes it; a person writing completions by hand cannot. This runs
and grades every test with the recording served by position alone (test, attempt, purpose,
turn), in a throwaway store, and writes the request each line answered into that line; the
completions, comments and order stay as written. Re-run it after editing a hand-written
line, a test, the context files or the warehouse the recording was written against.

Needs the suite's warehouse (build it first: `eval-pipeline warehouse`). Exits 1 when a line
was never reached (stale) or serves attempts that ask different things (split it per attempt).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from eval_pipeline.agents import recording_name
from eval_pipeline.agents._replay import REPLAY_PREFIX  # the unit itself: this is the rekey tool
from eval_pipeline.pipeline._rekey import (  # the unit itself: this is the rekey tool
    rekey_recordings,
)
from eval_pipeline.suite import load_suite


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?", default="tests_suite", help="the suite folder")
    parser.add_argument("recordings", nargs="*", help="recording names (default: the models')")
    parser.add_argument("-k", type=int, help="attempts per test (default: the suite's)")
    args = parser.parse_args()
    suite = load_suite(Path(args.suite))
    names = args.recordings or [
        n for n in map(recording_name, suite.config.test.models) if n is not None
    ]
    if not names:
        print("no replay: model to re-key; name the recordings", file=sys.stderr)
        return 2
    reports = asyncio.run(rekey_recordings(suite, [REPLAY_PREFIX + n for n in names], k=args.k))
    problems = 0
    for report in reports:
        print(f"{report.path}: {report.keyed} line(s) keyed")
        if report.unused_lines:
            problems += 1
            print(f"  never reached (stale?), lines: {report.unused_lines}")
        if report.conflicting_lines:
            problems += 1
            print(
                "  serve attempts that ask different things (give them an `attempt` each), "
                f"lines: {report.conflicting_lines}"
            )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

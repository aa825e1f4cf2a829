"""Benchmark the agent runner: how close N tests × M models × k attempts get to ideal concurrency.

Run: python benchmarks/agent_throughput.py [--tests 50] [--models 2] [--attempts 3]
         [--latency-ms 200] [--concurrency 32] [--repeats 3] [--server process|thread]

Each run is the built-in agent on a small DuckDB warehouse making three completions against
the scripted OpenAI-compatible test server (list_tables, then execute_sql, then the answer),
through the real path: `execute_runs` → `BuiltinAgent` → `ProviderPool`'s pooled httpx
client → SQL sandbox. The server waits `latency` before every response, as a real provider
does while it generates, so with perfect concurrency the batch takes

    ideal = runs × 3 completions × latency / concurrency

The ratio wall / ideal says how much the runner, the client, the sandbox and the test server
add on top; the target is ≤ 1.3. By default the server runs in its own process, so its
threads do not compete with the runner for the interpreter lock (a real provider is another
machine); `--server thread` runs it in this process, as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_pipeline.agents import AgentRun, ChatMessage, RunRequest, RunStatus, execute_runs
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.servers import (
    Script,
    ScriptedServer,
    ServerProcess,
    answer,
    by_turn,
    call,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import (
    DAY,
    open_factory,
    write_suite,
)

COMPLETIONS_PER_RUN = 3
PROVIDER = "bench"


def three_completions() -> Script:
    """The conversation of every run: list the tables, run one query, answer."""
    return by_turn(
        tool_calls(call("list_tables")),
        tool_calls(execute_sql("SELECT status, sum(amount_usd) AS total FROM orders GROUP BY 1")),
        answer("Shipped orders bring 540 USD."),
    )


class ServerThread:
    """The scripted server in a thread of the measured process (`--server thread`)."""

    def __init__(self, latency_s: float) -> None:
        self._server = ScriptedServer("openai", script=three_completions(), latency_s=latency_s)

    def __enter__(self) -> str:
        return self._server.start().base_url

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


async def one_batch(
    suite_root: Path, models: list[str], attempts: int, concurrency: int
) -> tuple[float, float, list[AgentRun]]:
    """One batch through the runner: wall and CPU seconds of `execute_runs`, and the runs."""
    suite = load_suite(suite_root)
    async with open_factory(suite, concurrency=concurrency) as factory:
        for model in models:  # open the warehouse and the client before the clock starts
            factory.agent(model)
        await factory.chat_model(models[0]).complete(
            [ChatMessage("user", "warm-up")], tools=[], max_tokens=1
        )
        requests = [
            RunRequest(case, model, attempt, DAY, factory.context.hash)
            for model in models
            for case in suite.cases
            for attempt in range(attempts)
        ]
        started, cpu = time.perf_counter(), time.process_time()
        runs = await execute_runs(requests, factory.agent, concurrency=concurrency)
        return time.perf_counter() - started, time.process_time() - cpu, runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=50, help="test cases (N)")
    parser.add_argument("--models", type=int, default=2, help="models (M)")
    parser.add_argument("--attempts", type=int, default=3, help="attempts per test (k)")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="per completion (L)")
    parser.add_argument("--concurrency", type=int, default=32, help="runs in flight (C)")
    parser.add_argument("--repeats", type=int, default=3, help="batches; the median is kept")
    parser.add_argument("--server", choices=["process", "thread"], default="process")
    options = parser.parse_args(argv)

    latency_s = options.latency_ms / 1000
    models = [f"{PROVIDER}:model-{i}" for i in range(options.models)]
    runs = options.tests * options.models * options.attempts
    completions = runs * COMPLETIONS_PER_RUN
    ideal = completions * latency_s / options.concurrency
    print(
        f"{options.tests} tests × {options.models} models × {options.attempts} attempts = "
        f"{runs} runs, {completions} completions at {options.latency_ms:g} ms, "
        f"concurrency {options.concurrency}, server in a {options.server}"
    )
    if options.server == "process":
        server = ServerProcess(three_completions, latency_s=latency_s)
    else:
        server = ServerThread(latency_s)
    walls = []
    with tempfile.TemporaryDirectory() as folder, server as base_url:
        root = write_suite(
            Path(folder) / "suite",
            cases={
                f"t{i:03d}": f"Question {i}: what is the revenue?" for i in range(options.tests)
            },
            providers=[{"provider": PROVIDER, "base_url": base_url, "timeout_s": 60}],
        )
        for repeat in range(options.repeats):
            wall, cpu, done = asyncio.run(
                one_batch(root, models, options.attempts, options.concurrency)
            )
            failed = [r for r in done if r.status is not RunStatus.COMPLETED or r.turns != 3]
            if failed:
                print(f"  {len(failed)} runs did not complete as scripted: {failed[0].error}")
                return 1
            walls.append(wall)
            per_run = statistics.median(r.duration_ms for r in done) / 1000
            print(
                f"  batch {repeat + 1}: wall {wall:.3f} s, ratio {wall / ideal:.3f}, "
                f"median run {per_run:.3f} s (ideal {COMPLETIONS_PER_RUN * latency_s:.3f} s), "
                f"runner CPU {cpu:.2f} s ({cpu / completions * 1000:.1f} ms per completion)"
            )
    wall = statistics.median(walls)
    print(f"median wall {wall:.3f} s, ideal {ideal:.3f} s, ratio {wall / ideal:.3f}")
    # The runner's CPU per completion is what it adds; wall time also depends on whether a
    # core is free for it, so the load is shown too.
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs while measuring")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the HTTP client under the agents: CPU per request of each candidate wire.

Run: python benchmarks/http_client.py [--requests 3000] [--concurrency 16] [--repeats 3]

Each candidate sends `--requests` Chat Completions POSTs, `--concurrency` at a time, to the
scripted OpenAI-compatible test server in a process of its own (a provider is another
machine), and reads every reply as JSON. Printed per candidate: the median wall seconds and
CPU seconds of this process (the client's alone), the CPU per request, and its ratio to the
transport eval-pipeline uses:

* `send_with_retry, direct` — what a completion costs: `send_with_retry` on the
  `LimitedClient` every provider, agent and judge uses, whose direct route hands the request
  to `AiohttpTransport` without httpx's client pass (agents/_transport.py, agents/_retry.py);
* `httpx + aiohttp` — httpx's client over `AiohttpTransport`, each request through the client;
* `httpx + httpcore` — httpx's own transport, one pool of `--concurrency` connections;
* `aiohttp alone` — aiohttp's client with no httpx above it: the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import httpx  # noqa: E402

from eval_pipeline.agents import send_with_retry  # noqa: E402
from eval_pipeline.agents._transport import (  # noqa: E402  # the unit itself: transports compared
    AiohttpTransport,
    LimitedClient,
)
from eval_pipeline_tests.agents.servers import ServerProcess, answer  # noqa: E402

BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "How many orders have an id up to 3?"}],
    "max_tokens": 100,
}


def same_answer():
    return lambda _request, _index: answer("There are 3 orders.")


async def _many(send: Callable[[], Awaitable[None]], requests: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await send()

    await asyncio.gather(*(one() for _ in range(requests)))


async def with_httpx(url: str, transport: httpx.AsyncBaseTransport, n: int, c: int) -> None:
    async with httpx.AsyncClient(transport=transport, timeout=60) as client:

        async def send() -> None:
            reply = await client.post(url, json=BODY)
            reply.raise_for_status()
            reply.json()

        await _many(send, n, c)


async def with_send_with_retry(url: str, n: int, c: int) -> None:
    async with LimitedClient(transport=AiohttpTransport(c), timeout=60) as client:

        async def send() -> None:
            reply = await send_with_retry(client, "POST", url, endpoint="bench", json=BODY)
            reply.json()

        await _many(send, n, c)


async def with_aiohttp(url: str, n: int, c: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as session:

        async def send() -> None:
            async with session.post(url, json=BODY) as reply:
                reply.raise_for_status()
                json.loads(await reply.read())

        await _many(send, n, c)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    n, c = options.requests, options.concurrency
    print(f"{n} requests, {c} at a time; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    candidates: dict[str, Callable[[str], Awaitable[None]]] = {
        "send_with_retry, direct": lambda url: with_send_with_retry(url, n, c),
        "httpx + aiohttp": lambda url: with_httpx(url, AiohttpTransport(c), n, c),
        "httpx + httpcore": lambda url: with_httpx(
            url, httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=c)), n, c
        ),
        "aiohttp alone": lambda url: with_aiohttp(url, n, c),
    }
    cpu: dict[str, float] = {}
    with ServerProcess(same_answer) as base_url:
        url = f"{base_url}/chat/completions"
        for name, run in candidates.items():
            walls, cpus = [], []
            for _ in range(options.repeats):
                wall0, cpu0 = time.perf_counter(), time.process_time()
                asyncio.run(run(url))
                walls.append(time.perf_counter() - wall0)
                cpus.append(time.process_time() - cpu0)
            cpu[name] = statistics.median(cpus)
            print(
                f"  {name:23} wall {statistics.median(walls):5.2f} s, CPU {cpu[name]:5.2f} s, "
                f"{cpu[name] / n * 1000:.2f} ms CPU a request, load {os.getloadavg()[0]:.1f}"
            )
    ours = cpu["httpx + aiohttp"]
    for name, seconds in cpu.items():
        print(f"  CPU of {name} / httpx + aiohttp: {seconds / ours:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

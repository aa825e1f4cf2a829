"""Scripted agents with known pass probabilities, for attempt-budget tests and benchmarks.

Each agent speaks the external agent protocol (`docs/agent-protocol.md`) on 127.0.0.1 and
answers test `tNN` right with its own probability for that test, decided by a hash of
(seed, agent, test, attempt, day): the same attempt always gets the same answer, so a rerun
reuses it and the truth is known by construction. Sample data, not a model.

    probabilities = {"good": {"t00": 0.9, ...}, "weak": {"t00": 0.3, ...}}
    with CoinAgents(probabilities) as agents:
        root = agents.write_suite(tmp_path / "suite")
        # eval-pipeline test -m http:good -m http:weak --budget 60
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import yaml

COST_USD = 0.001  # what a run of a priced agent costs

Probabilities = Mapping[str, Mapping[str, float]]
"""agent name → test name → the chance it answers that test right."""


def right_answer(test: str) -> int:
    """The reference answer of test `tNN`: NN + 100."""
    return int(test.lstrip("t")) + 100


def answers_right(seed: int, agent: str, test: str, attempt: int, day: str, p: float) -> bool:
    """Whether the agent's attempt is right: a uniform draw from a hash, below `p`."""
    digest = hashlib.sha256(f"{seed}|{agent}|{test}|{attempt}|{day}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < p


class CoinAgents:
    """The agents' HTTP server (one path per agent: /<agent>), counting the requests."""

    def __init__(
        self,
        probabilities: Probabilities,
        *,
        seed: int = 0,
        day: str = "",
        unpriced: frozenset[str] = frozenset(),
    ) -> None:
        """`unpriced`: agents whose replies carry no cost (a cost unknown, as the protocol
        allows); the others cost $0.001 a run."""
        self.probabilities = probabilities
        self.unpriced = unpriced
        self.seed = seed
        self.day = day
        self.requests: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> CoinAgents:
        agents = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent, test, attempt = self.path.strip("/"), body["test"], int(body["attempt"])
                with agents._lock:
                    agents.requests.append((agent, test, attempt))
                p = agents.probabilities[agent][test]
                right = answers_right(agents.seed, agent, test, attempt, agents.day, p)
                value = right_answer(test) + (0 if right else 1)
                reply = {
                    "text": f"The answer is {value}.",
                    "answer": {"columns": ["answer"], "rows": [[value]]},
                }
                if agent not in agents.unpriced:
                    reply["cost_usd"] = COST_USD
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._server.request_queue_size = 128  # every run of a round may connect at once
        self._server.server_bind()
        self._server.server_activate()
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def tests(self) -> list[str]:
        return sorted({test for tests in self.probabilities.values() for test in tests})

    def write_suite(self, root: Path, *, threads: int = 8) -> Path:
        """A suite of one test per `tNN` (reference `SELECT NN + 100 AS answer`), its agents
        declared under `agents:` as `http:<name>`."""
        (root / "cases").mkdir(parents=True)
        duckdb.connect(str(root / "warehouse.duckdb")).close()
        config = {
            "test": {"models": [f"http:{name}" for name in self.probabilities], "threads": threads},
            "warehouse": {"type": "duckdb", "path": "warehouse.duckdb"},
            "agents": [{"name": name, "url": f"{self.url}/{name}"} for name in self.probabilities],
        }
        (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        for test in self.tests():
            case = {
                "name": test,
                "prompt": f"What is the answer of {test}?",
                "sql": f"SELECT {right_answer(test)} AS answer",
            }
            (root / "cases" / f"{test}.yml").write_text(yaml.safe_dump(case, sort_keys=False))
        return root

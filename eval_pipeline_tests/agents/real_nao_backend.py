"""The real nao backend of nao-core 0.3.29 (its FastAPI server and `nao-chat-server`) in a virtual environment of its own, started on 127.0.0.1 for a test.

The environment is made once and kept outside the repository
(`~/.cache/eval_pipeline_tests/nao-core-0.3.29`, made under a file lock, so parallel workers
build it once); the backend is started as `nao chat` starts it, bound to 127.0.0.1 on free
ports, its database in the test's temporary folder, its telemetry off.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

NAO_CORE = "nao-core[duckdb]==0.3.29"
CACHE = Path.home() / ".cache" / "eval_pipeline_tests" / "nao-core-0.3.29"
_READY = "ready"


class NaoUnavailable(Exception):
    """The nao-core wheel could not be installed here (no registry, no wheel for this platform)."""


def nao_python(cache: Path = CACHE) -> Path:
    """The Python of a virtual environment holding nao-core 0.3.29, made on first use.

    Raises:
        NaoUnavailable: pip could not install the wheel (its output says why).
    """
    cache.mkdir(parents=True, exist_ok=True)
    python = cache / "venv" / "bin" / "python"
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds it; the others wait and reuse it
        if (cache / _READY).exists() and python.exists():
            return python
        steps = (
            [sys.executable, "-m", "venv", "--clear", str(cache / "venv")],
            [str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"],
            [str(python), "-m", "pip", "install", "-q", NAO_CORE],
            # The DuckDB engine the backend verifies answers with (npm, into ~/.nao/native).
            [
                str(python),
                "-c",
                "from nao_core import native; "
                "assert native.ensure_group(native.server_bin_dir(), 'duckdb')",
            ],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise NaoUnavailable(
                    f"`{' '.join(step[:4])} …` failed: {(done.stderr or done.stdout)[-800:]}"
                )
        (cache / _READY).write_text(NAO_CORE)
    return python


def nao_config_yaml(llm_url: str, key_variable: str) -> str:
    """`nao_config.yaml` of a nao project `shop` with one DuckDB file (`data/shop.duckdb`)
    and one OpenAI-compatible provider `openaiCompatible/vllm` serving `qwen3` at `llm_url`,
    its key read from `key_variable`, as nao documents it."""
    return (
        "project_name: shop\n"
        "databases:\n  - name: shop\n    type: duckdb\n    path: data/shop.duckdb\n"
        "llm:\n  providers:\n    - provider: openaiCompatible/vllm\n"
        f"      base_url: {llm_url}\n"
        f"      api_key: ${{{{ env('{key_variable}') }}}}\n"
        "      models:\n        - id: qwen3\n"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:g} s: {log.read_text()[-2000:]}")


@dataclass
class NaoBackend:
    url: str
    log: Path
    processes: tuple[subprocess.Popen, ...]

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Origin": self.url},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def sign_up(self, email: str, password: str) -> None:
        status, body = self.post(
            "/api/auth/sign-up/email", {"email": email, "password": password, "name": "Analyst"}
        )
        if status != 200:
            raise RuntimeError(f"sign-up failed ({status}): {body}")


@contextmanager
def nao_backend(
    python: Path, project: Path, state: Path, env: dict[str, str]
) -> Iterator[NaoBackend]:
    """FastAPI and `nao-chat-server` of the environment of `python`, serving `project`.

    Args:
        python: `nao_python()`.
        project: the nao project (its `nao_config.yaml`) the backend serves.
        state: a folder of the test for the backend's SQLite database and logs.
        env: more environment (the LLM key variables `nao_config.yaml` reads).
    """
    where = subprocess.check_output(
        [
            str(python),
            "-c",
            "from nao_core import native; b = native.server_bin_dir(); "
            "print(b); print(native.node_path(b))",
        ],
        text=True,
    ).splitlines()
    bin_dir, node_path = Path(where[0]), where[1]
    port, fastapi_port = _free_port(), _free_port()
    url = f"http://127.0.0.1:{port}"
    common = {
        **os.environ,
        **env,
        "FASTAPI_PORT": str(fastapi_port),
        "BETTER_AUTH_SECRET": secrets.token_hex(32),
        "BETTER_AUTH_URL": url,
        "NAO_DEFAULT_PROJECT_PATH": str(project),
        "MODE": "prod",
        "NAO_CORE_VERSION": "0.3.29",
        "NODE_PATH": node_path,
        "DB_URI": f"sqlite:{state / 'nao.sqlite'}",
        "POSTHOG_DISABLED": "true",
        "DO_NOT_TRACK": "1",
    }
    log = state / "nao-backend.log"
    processes: list[subprocess.Popen] = []
    with open(log, "w") as out:
        try:
            fastapi = subprocess.Popen(
                [str(python), str(bin_dir / "fastapi" / "main.py")],
                env={**common, "PORT": str(fastapi_port), "HOST": "127.0.0.1"},
                cwd=state,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            processes.append(fastapi)
            _wait_for(f"http://127.0.0.1:{fastapi_port}/", fastapi, log)
            chat = subprocess.Popen(
                [str(bin_dir / "nao-chat-server"), "--port", str(port), "--host", "127.0.0.1"],
                env=common,
                cwd=bin_dir,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            processes.append(chat)
            _wait_for(url + "/api/auth/ok", chat, log)
            yield NaoBackend(url, log, tuple(processes))
        finally:
            for process in reversed(processes):
                process.terminate()
            for process in processes:
                with suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
                if process.poll() is None:
                    process.kill()
                    process.wait()

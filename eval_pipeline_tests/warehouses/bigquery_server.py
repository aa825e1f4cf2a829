"""bqemulator 1.4.0 (BigQuery's REST and gRPC APIs on DuckDB) in a virtual environment of its own, started on 127.0.0.1 for the tests, holding the small warehouse.

Its pins clash with ours (sqlglot <30.12, grpcio-tools <1.81), and it needs DuckDB's spatial
extension, which DuckDB downloads at start (no network here): the environment takes DuckDB
1.5.5 and the extension from PyPI (`duckdb-extension-spatial` 1.5.5), copied where DuckDB
looks for it under the emulator's own HOME. Made once under a file lock in
`~/.cache/eval_pipeline_tests/bqemulator-1.4.0` (`.ci/run` builds it in the background).
The real `google-cloud-bigquery` of our environment talks to it (`api_endpoint`, anonymous).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BQEMULATOR = "bqemulator==1.4.0"
#: The DuckDB the emulator runs on: one whose spatial extension PyPI ships.
DUCKDB_PINS = ("duckdb==1.5.5", "duckdb-extension-spatial==1.5.5", "numpy")
CACHE = Path.home() / ".cache" / "eval_pipeline_tests" / "bqemulator-1.4.0"
PROJECT = "eval-project"
DATASET = "shop"
_READY = "ready"


class EmulatorUnavailable(Exception):
    """bqemulator could not be installed here (no registry, no wheel for this platform)."""


def emulator_python(cache: Path = CACHE) -> Path:
    """The Python of a virtual environment holding bqemulator, made on first use.

    Raises:
        EmulatorUnavailable: pip could not install it (its output says why).
    """
    cache.mkdir(parents=True, exist_ok=True)
    python = cache / "venv" / "bin" / "python"
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds it; the others wait and reuse it
        if (cache / _READY).exists() and python.exists():
            return python
        steps = (
            [sys.executable, "-m", "venv", "--clear", str(cache / "venv")],
            [str(python), "-m", "pip", "install", "-q", BQEMULATOR, *DUCKDB_PINS],
            [
                str(python),
                "-c",
                "import duckdb_extension_spatial as e, pathlib, shutil, sys; "
                "src = pathlib.Path(e.__file__).parent / 'extensions/v1.5.5/spatial.duckdb_extension'; "
                "dst = pathlib.Path(sys.argv[1]) / '.duckdb/extensions/v1.5.5/linux_amd64'; "
                "dst.mkdir(parents=True, exist_ok=True); shutil.copy(src, dst)",
                str(cache / "home"),
            ],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise EmulatorUnavailable(
                    f"`{' '.join(step[:5])} …` failed: {(done.stderr or done.stdout)[-800:]}"
                )
        (cache / _READY).write_text(BQEMULATOR)
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class Emulator:
    endpoint: str  # http://127.0.0.1:PORT
    log: Path
    pid: int

    def url(self, dataset: str = DATASET, **options: str) -> str:
        """The `bigquery://` URL of a dataset on the emulator."""
        query = "&".join(f"{k}={v}" for k, v in {"api_endpoint": self.endpoint, **options}.items())
        return f"bigquery://{PROJECT}/{dataset}?{query}"

    def client(self):  # -> google.cloud.bigquery.Client
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import bigquery

        return bigquery.Client(
            project=PROJECT,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.endpoint},
        )


@contextlib.contextmanager
def bigquery_emulator(folder: Path) -> Iterator[Emulator]:
    """A fresh in-memory emulator on free ports, its log in `folder`, stopped on exit."""
    python = emulator_python()
    rest, grpc_port = _free_port(), _free_port()
    log = folder / "bqemulator.log"
    environment = {**os.environ, "HOME": str(CACHE / "home")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(python),
                "-m",
                "bqemulator",
                "start",
                "--rest-host=127.0.0.1",
                f"--rest-port={rest}",
                "--grpc-host=127.0.0.1",
                f"--grpc-port={grpc_port}",
                f"--project={PROJECT}",
                "--log-level=warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    endpoint = f"http://127.0.0.1:{rest}"
    try:
        _wait_for(f"{endpoint}/bigquery/v2/projects/{PROJECT}/datasets", process, log)
        yield Emulator(endpoint, log, process.pid)
    finally:  # in memory, nothing to keep: killed, not left to finish a slow query first
        process.kill()
        process.wait()


def _wait_for(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"bqemulator exited with {process.returncode}: {log.read_text()[-2000:]}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(
        f"bqemulator did not answer within {timeout_s:g} s: {log.read_text()[-2000:]}"
    )


def load_small_warehouse(emulator: Emulator) -> None:
    """The small warehouse (small_warehouse.py) in the dataset `shop`, in BigQuery's types."""
    client = emulator.client()
    client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
    for statement in bigquery_load_statements():
        client.query(statement).result()
    client.close()


def bigquery_load_statements() -> list[str]:
    from eval_pipeline_tests.warehouses import small_warehouse as small

    kinds = {
        "int": "INT64",
        "text": "STRING",
        "date": "DATE",
        "bool": "BOOL",
        "money": "NUMERIC(12, 2)",
        "ts": "DATETIME",
        "tstz": "TIMESTAMP",
    }
    statements = []
    for table, columns in small._COLUMNS.items():
        defs = ", ".join(f"{name} {kinds[kind]}" for name, kind in columns)
        comment = small.TABLE_COMMENTS[table].replace("'", "\\'")
        statements.append(
            f"CREATE TABLE {DATASET}.{table} ({defs}) OPTIONS(description='{comment}')"
        )
        values = ", ".join(
            "("
            + ", ".join(
                _literal(value, kind) for value, (_, kind) in zip(row, columns, strict=True)
            )
            + ")"
            for row in small._ROWS[table]
        )
        statements.append(f"INSERT INTO {DATASET}.{table} VALUES {values}")
    return statements


def _literal(value: object, kind: str) -> str:
    if value is None:
        return "NULL"
    if kind == "bool":
        return "TRUE" if value else "FALSE"
    if kind == "money":
        return f"NUMERIC '{value}'"
    if kind == "int":
        return str(value)
    if kind == "ts":
        return f"DATETIME '{value.isoformat(sep=' ')}'"  # type: ignore[attr-defined]
    if kind == "tstz":
        return f"TIMESTAMP '{value.isoformat(sep=' ')}+00'"  # type: ignore[attr-defined]
    if kind == "date":
        return f"DATE '{value.isoformat()}'"  # type: ignore[attr-defined]
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"

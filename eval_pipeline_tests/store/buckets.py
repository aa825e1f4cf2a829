"""An S3-compatible endpoint for tests: `moto_server` on 127.0.0.1, a fresh bucket per test.

Credentials are moto's dummies, given through the AWS_* environment as a user's would be;
subprocesses (the CLI, run workers) inherit them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eval_pipeline_tests.warehouses.servers import _stop, _wait_for_port, free_port

MOTO_SERVER = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
# Never real keys: a leak of these in the store or a log would still be caught by tests.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAEVALPIPELINETEST",
    "AWS_SECRET_ACCESS_KEY": "moto-secret-never-stored-0123456789",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class Bucket:
    """A bucket on the test endpoint; `url` is what `store.url` names."""

    endpoint_url: str
    name: str
    prefix: str = "suite"

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}"

    @property
    def store_config(self) -> dict[str, str]:
        return {"url": self.url, "endpoint_url": self.endpoint_url}

    def object_keys(self) -> list[str]:
        """Every object key below the prefix, relative to it."""
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=self.endpoint_url, use_listings_cache=False)
        root = f"{self.name}/{self.prefix}/"
        return sorted(k[len(root) :] for k in fs.find(root))

    def read(self, key: str) -> bytes:
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=self.endpoint_url, use_listings_cache=False)
        return fs.cat_file(f"{self.name}/{self.prefix}/{key}")


def moto_missing() -> str | None:
    if not Path(MOTO_SERVER).exists():
        return "moto_server is not installed: pip install 'eval-pipeline[dev]'"
    return None


@contextlib.contextmanager
def moto_endpoint() -> Iterator[str]:
    """A `moto_server` on a free port of 127.0.0.1, stopped on exit; its endpoint URL."""
    with moto_process() as (endpoint, _pid):
        yield endpoint


@contextlib.contextmanager
def moto_process() -> Iterator[tuple[str, int]]:
    """A `moto_server` as `moto_endpoint` starts it: its endpoint URL and process id."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="eval-moto-") as folder:
        log = Path(folder) / "moto.log"
        with open(log, "w") as output:
            process = subprocess.Popen(
                [MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**os.environ, **AWS_ENV},
            )
        try:
            _wait_for_port(port, process, log)
            yield f"http://127.0.0.1:{port}", process.pid
        finally:
            _stop(process)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    if (reason := moto_missing()) is not None:
        pytest.skip(reason)
    with moto_endpoint() as endpoint:
        yield endpoint


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A new, empty bucket; the AWS_* environment set for this process and its children."""
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    import s3fs

    made = Bucket(s3_endpoint, f"eval-{uuid.uuid4().hex[:12]}")
    s3fs.S3FileSystem(endpoint_url=s3_endpoint).mkdir(made.name)
    return made

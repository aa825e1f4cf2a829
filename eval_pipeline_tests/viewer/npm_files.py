"""Files of npm packages, fetched once from the npm registry (checked against its integrity
hash) and kept in a cache outside the repository, for pages that load them from a CDN."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
from pathlib import Path

import httpx

REGISTRY = os.environ.get("EVAL_NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")
CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eval_pipeline_tests" / "npm"
)


class NpmUnavailable(RuntimeError):
    """The registry could not be reached or did not serve the package."""


def npm_file(package: str, version: str, path: str) -> bytes:
    """`path` inside the tarball of `package@version` (e.g. "umd/react.production.min.js")."""
    cached = CACHE / f"{package.replace('/', '+')}@{version}" / path
    if cached.is_file():
        return cached.read_bytes()
    try:
        meta = httpx.get(f"{REGISTRY}/{package.replace('/', '%2f')}/{version}", timeout=30)
        meta.raise_for_status()
        dist = meta.json()["dist"]
        tarball = httpx.get(dist["tarball"], timeout=120, follow_redirects=True)
        tarball.raise_for_status()
    except (httpx.HTTPError, KeyError, ValueError) as error:
        raise NpmUnavailable(f"{package}@{version} from {REGISTRY}: {error}") from error
    algorithm, _, expected = dist["integrity"].partition("-")
    digest = base64.b64encode(hashlib.new(algorithm, tarball.content).digest()).decode()
    if digest != expected:
        raise NpmUnavailable(f"{package}@{version}: the tarball does not match its integrity")
    with tarfile.open(fileobj=io.BytesIO(tarball.content), mode="r:gz") as archive:
        member = archive.extractfile(f"package/{path}")
        if member is None:
            raise NpmUnavailable(f"{package}@{version} holds no {path}")
        content = member.read()
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(cached.suffix + f".{os.getpid()}")
    partial.write_bytes(content)
    partial.replace(cached)  # whole or absent, for a worker that reads it at the same time
    return content

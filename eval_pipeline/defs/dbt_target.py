"""Where the definitions keep what they parse from a dbt project (its manifest, the cached asset keys): outside the suite folder, so loading them writes nothing into it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CACHE_ENV = "EVAL_PIPELINE_CACHE_DIR"
MANIFEST = "manifest.json"


def user_cache_dir() -> Path:
    """`$EVAL_PIPELINE_CACHE_DIR`, else `$XDG_CACHE_HOME/eval_pipeline`, else
    `~/.cache/eval_pipeline`: what can be computed again, kept per user."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "eval_pipeline"


def project_cache_dir(project_dir: Path, *, variant: str = "") -> Path:
    """The cache folder of one dbt project (and `variant`, e.g. the vars it is parsed with)."""
    identity = f"{project_dir.resolve()}\n{variant}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return user_cache_dir() / "dbt" / f"{project_dir.name}-{digest}"


def parse_target(project_dir: Path, own_target: Path | None = None) -> Path:
    """The target folder whose manifest the definitions read: the project's own (`own_target`,
    default `<project>/target`: the user ran dbt there, or a test copied one in) when its
    manifest is the newer, else the cache's, where a parse of ours goes. A suite folder may
    be read-only, shared, or a team's repository: loading definitions never writes into it."""
    own = own_target or project_dir / "target"
    cached = project_cache_dir(project_dir) / "target"
    found = [t for t in (own, cached) if (t / MANIFEST).is_file()]
    if not found:
        return cached
    return max(found, key=lambda target: (target / MANIFEST).stat().st_mtime_ns)

"""The warehouse's dbt asset keys and their parents, cached in the user's cache, without importing dagster_dbt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.dbt_target import MANIFEST, parse_target, project_cache_dir
from eval_pipeline.suite import WarehouseConfig

CACHE_NAME = "eval_pipeline_asset_keys.json"


def keys_cache(project_dir: Path) -> Path:
    """The file caching a dbt project's asset keys, in the user's cache."""
    return project_cache_dir(project_dir) / CACHE_NAME


def _stamp(manifest: Path) -> str | None:
    try:
        stat = manifest.stat()
    except FileNotFoundError:
        return None
    return f"{manifest}:{stat.st_mtime_ns}:{stat.st_size}"


def warehouse_asset_keys(
    warehouse: WarehouseConfig,
) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    """The keys the dbt assets of `warehouse` have (`warehouse/<model>`, …), each with the
    keys it is built from.

    Importing dagster_dbt and loading a manifest take seconds, and an evaluation only needs
    the keys its assets depend on. They are computed once by the real dbt assets and cached
    (`keys_cache`), stamped with the manifest's path, mtime and size: a re-parsed project
    recomputes them.
    """
    assert warehouse.dbt_project is not None
    manifest = parse_target(warehouse.dbt_project) / MANIFEST
    cache = keys_cache(warehouse.dbt_project)
    stamp = _stamp(manifest)
    if stamp is not None:
        try:
            cached = json.loads(cache.read_text(encoding="utf-8"))
            if cached.get("manifest") == stamp:
                return {
                    dg.AssetKey(path): {dg.AssetKey(parent) for parent in parents}
                    for path, parents in cached["models"]
                }
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing or damaged: recompute below
    from eval_pipeline.defs.assets.warehouse import build_warehouse_assets

    assets, _ = build_warehouse_assets(warehouse)  # parses the project when it has no manifest
    models = {
        key: set(assets.asset_deps.get(key, set()))
        for key in sorted(assets.keys, key=lambda key: key.path)
    }
    manifest = parse_target(warehouse.dbt_project) / MANIFEST  # where the parse went
    stamp = _stamp(manifest)
    if stamp is not None:
        partial = cache.with_name(f"{CACHE_NAME}.{os.getpid()}.tmp")
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(
                json.dumps(
                    {
                        "manifest": stamp,
                        "models": [
                            [key.path, sorted(parent.path for parent in parents)]
                            for key, parents in models.items()
                        ],
                    }
                ),
                encoding="utf-8",
            )
            partial.replace(cache)
        except OSError:
            partial.unlink(missing_ok=True)  # a read-only cache: computed again next time
    return models

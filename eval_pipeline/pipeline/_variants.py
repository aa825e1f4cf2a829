"""Warehouse variants of the semantic check: built once per warehouse data version and seed, reused."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.grading import WarehouseVariants, build_variants, load_variants
from eval_pipeline.sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.store import StateFolder, file_lock, quote_part
from eval_pipeline.suite import DUCKDB, Case, DatabaseConfig, Suite

__all__ = ["BuiltVariants", "VariantSandboxes", "build_suite_variants", "ensure_variants"]

#: The same limits as a reference run: the semantic check re-runs the reference there.
VARIANT_LIMITS = SandboxLimits(timeout_s=120.0, store_max_rows=100_000, model_max_rows=1)


def warehouse_data_version(path: Path) -> str:
    """The DuckDB file's data version: its size and modification time, so a rebuilt
    warehouse gets new variants without reading the whole file."""
    stat = path.stat()
    return hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BuiltVariants:
    """One database's variants for one seed, and whether this call built them."""

    database: str
    seed: int
    data_version: str
    variants: WarehouseVariants
    built: bool


def ensure_variants(
    database: DatabaseConfig, *, count: int, seed: int, layout: StateFolder
) -> BuiltVariants | str:
    """The database's variants for `seed`, at least `count` of them: reused when a whole build
    for the warehouse's current data version exists, built (under a lock, so parallel
    gradings build once) otherwise. A reason string when the database has none: variants are
    DuckDB files, so a database of another engine (PostgreSQL, MariaDB) cannot have them."""
    if database.type != DUCKDB or database.path is None:
        what = "a server" if database.is_server else f"a {database.type} file"
        return f"the semantic check needs a DuckDB warehouse; database {database.name} is {what}"
    if not database.path.is_file():
        return f"the warehouse {database.path} does not exist; build it first"
    version = warehouse_data_version(database.path)
    folder = layout.variants_dir / quote_part(database.name) / version / f"seed={seed}"
    with file_lock(folder.with_name(f"seed={seed}.lock")):
        found = load_variants(folder)
        if found is not None and len(found.paths) >= count:
            return BuiltVariants(database.name, seed, version, found, built=False)
        built = build_variants(database.path, folder, count=count, seed=seed)
    return BuiltVariants(database.name, seed, version, built, built=True)


def _needed(suite: Suite) -> dict[tuple[str, int], int]:
    """(database name, seed) → the most variants any case with the semantic check asks."""
    needed: dict[tuple[str, int], int] = {}
    for case in suite.cases:
        database = suite.config.database(case.database)
        if case.semantic is None or case.sql is None or database is None:
            continue
        key = (database.name, case.semantic.seed)
        needed[key] = max(needed.get(key, 0), case.semantic.variants)
    return needed


def build_suite_variants(suite: Suite, layout: StateFolder) -> list[BuiltVariants | str]:
    """Every variant set the suite's semantic checks need (the `warehouse_variants` asset)."""
    found: list[BuiltVariants | str] = []
    for (name, seed), count in sorted(_needed(suite).items()):
        database = suite.config.database(name)
        assert database is not None
        found.append(ensure_variants(database, count=count, seed=seed, layout=layout))
    return found


class VariantSandboxes:
    """The grader's `variants` source: a case's variants, opened once per grading and closed
    after it (`with VariantSandboxes(...) as source: Grader(variants=source)`)."""

    def __init__(self, suite: Suite, layout: StateFolder) -> None:
        self._suite, self._layout = suite, layout
        self._needed = _needed(suite)
        self._open: dict[tuple[str, int], list[SqlSandbox] | str] = {}

    def __call__(self, case: Case) -> Sequence[SqlSandbox] | str:
        database = self._suite.config.database(case.database)
        if case.semantic is None or database is None:
            return "the test has no semantic check"
        key = (database.name, case.semantic.seed)
        if key not in self._open:
            count = self._needed.get(key, case.semantic.variants)
            ready = ensure_variants(database, count=count, seed=key[1], layout=self._layout)
            self._open[key] = (
                ready if isinstance(ready, str) else ready.variants.open(VARIANT_LIMITS)
            )
        return self._open[key]

    def close(self) -> None:
        for opened in self._open.values():
            if not isinstance(opened, str):
                for sandbox in opened:
                    sandbox.close()
        self._open.clear()

    def __enter__(self) -> VariantSandboxes:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

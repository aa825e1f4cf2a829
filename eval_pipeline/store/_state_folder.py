"""A suite's state folder (`.eval/`): the one place that knows every path below it."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eval_pipeline.store._objects import bucket_location
from eval_pipeline.store._tables import TABLES

if TYPE_CHECKING:
    from eval_pipeline.suite import SuiteConfig


def quote_part(value: str) -> str:
    """A model id as a folder name (ids hold ':' and may hold '/')."""
    return urllib.parse.quote(value, safe="")


@dataclass(frozen=True)
class StateFolder:
    """A suite's state folder (default `<suite>/.eval/`) and every path below it: the one place
    that knows where results.duckdb, the store's tables (or bucket), journals, caches, reports,
    logs, the Dagster home and lock files live.

    With a bucket (`store: {url: s3://…}`), the tables, segments, journals and quarantine are
    objects below `bucket_url` (`objects_root`, a `UPath`), under the same names; the local
    folders (results.duckdb, a copy of the tables; caches, logs, reports, the Dagster home, locks) stay in
    `root` on the machine that runs.
    """

    root: Path
    bucket_url: str | None = None
    endpoint_url: str | None = None

    @classmethod
    def of(cls, config: SuiteConfig) -> StateFolder:
        """The state folder (and store) a suite's configuration names (`state_dir`, `store:`)."""
        store = config.store
        if store is None:
            return cls(config.state_path)
        return cls(config.state_path, bucket_url=store.url, endpoint_url=store.endpoint_url)

    @property
    def remote(self) -> bool:
        """Whether the tables live in a bucket (no rename, no lock there)."""
        return self.bucket_url is not None

    @property
    def objects_root(self) -> Any:
        """Where tables, journals and quarantine live: `root` or the bucket (a `UPath`)."""
        if self.bucket_url is None:
            return self.root
        return bucket_location(self.bucket_url, self.endpoint_url)

    @property
    def location(self) -> str:
        """The tables' folder or bucket prefix, as people and DuckDB spell it."""
        if self.bucket_url is None:
            return self.tables_dir.resolve().as_posix()
        return self.tables_dir.as_posix()

    @property
    def database(self) -> Path:
        return self.root / "results.duckdb"

    @property
    def published_marker(self) -> Path:
        """What results.duckdb was published from (the store's state, version, tables)."""
        return self.root / "results.published.json"

    @property
    def history_database(self) -> Path:
        """The history marts (dbt over the results); a file of its own, so building them
        never needs the write lock of results.duckdb, which readers hold."""
        return self.root / "history.duckdb"

    @property
    def history_dbt_dir(self) -> Path:
        """The history dbt project's run artefacts and logs."""
        return self.root / "history_dbt"

    @property
    def history_dbt_target(self) -> Path:
        """Where the packaged history dbt project is parsed (its manifest.json), so nothing is
        ever written into the installed package."""
        return self.history_dbt_dir / "target"

    @property
    def tables_dir(self) -> Path:
        return self.objects_root / "store"

    @property
    def journal_dir(self) -> Path:
        return self.objects_root / "journal"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def variants_dir(self) -> Path:
        """Warehouse variants of the semantic check, per database, data version and seed: a
        local cache, rebuilt when the warehouse changes."""
        return self.root / "variants"

    @property
    def recordings_dir(self) -> Path:
        return self.root / "recordings"

    @property
    def reports_dir(self) -> Path:
        """The daily Markdown reports (`report_<day>.md`)."""
        return self.root / "reports"

    def report_file(self, day: date) -> Path:
        return self.reports_dir / f"report_{day.isoformat()}.md"

    @property
    def logs_dir(self) -> Path:
        """Logs of commands and builds (the warehouse build, the error log)."""
        return self.root / "logs"

    @property
    def dagster_home(self) -> Path:
        """The suite's own Dagster instance, used unless `$DAGSTER_HOME` names another; kept
        beside the results, so a suite copied elsewhere keeps its run history."""
        return self.root / "dagster_home"

    def table_dir(self, table: str) -> Path:
        return self.tables_dir / table

    def partition_dir(
        self, table: str, *, model: str | None = None, run_date: date | None = None
    ) -> Path:
        spec = TABLES[table]
        path = self.table_dir(table)
        if spec.partitioning in ("date", "model_date"):
            if run_date is None:
                raise ValueError(f"table {table} is partitioned by date")
            path = path / f"date={run_date.isoformat()}"
        if spec.partitioning == "model_date":
            if model is None:
                raise ValueError(f"table {table} is partitioned by model")
            path = path / f"model={quote_part(model)}"
        return path

    def partition_uri(
        self, table: str, *, model: str | None = None, run_date: date | None = None
    ) -> str:
        """Where a partition's files are, as a URI (`file:///…`, `s3://…`): what a catalog
        shows as the data's location."""
        path = self.partition_dir(table, model=model, run_date=run_date)
        return str(path) if self.remote else Path(path).resolve().as_uri()

    def glob(self, table: str) -> str:
        """Every file of a table, for DuckDB's `read_parquet` (schema file included)."""
        return (self.table_dir(table) / "**" / "*.parquet").as_posix()

    def empty_file(self, table: str) -> Path:
        """A zero-row file with the table's schema, so the views work before any write."""
        return self.table_dir(table) / "_schema.parquet"

    def data_glob(self, table: str) -> str:
        """Every data file of a table (named `<UTC timestamp>_<id>.parquet`), not the schema file."""
        return (self.table_dir(table) / "**" / "[0-9]*.parquet").as_posix()

    def partition_key(
        self, table: str, *, model: str | None = None, run_date: date | None = None
    ) -> str:
        """A partition's folder relative to its table's (`date=…/model=…`, '' for "none")."""
        folder = self.partition_dir(table, model=model, run_date=run_date)
        relative = folder.relative_to(self.table_dir(table)).as_posix()
        return "" if relative == "." else relative

    @property
    def segments_root(self) -> Path:
        """Compacted segments, outside every table's folder so the tables' globs never see them."""
        return self.tables_dir / "_segments"

    @property
    def generation_file(self) -> Path:
        """The current compaction generation (its cutoff); absent before the first compaction."""
        return self.segments_root / "generation.json"

    def segment(self, table: str, cutoff: str, kind: Literal["current", "history"]) -> Path:
        """A compacted segment: `history` holds every row written before `cutoff`, `current`
        each partition's latest rows as of `cutoff` (with the partition in `_partition`)."""
        return self.segments_root / table / f"{cutoff}_{kind}.parquet"

    @property
    def quarantine_dir(self) -> Path:
        """Damaged files moved out of the store (same relative paths), with `records.jsonl`
        (`quarantine_records`) saying which table and partition each held and why."""
        return self.objects_root / "quarantine"

    @property
    def quarantine_records(self) -> Path:
        return self.quarantine_dir / "records.jsonl"

    # Lock files (taken through `store._locks`, never opened directly).

    @property
    def locks_dir(self) -> Path:
        """The partition locks' folder."""
        return self.root / "locks"

    def partition_lock_file(self, model: str, run_date: date) -> Path:
        """Held by a writer of a (model, day) partition's runs, grades or summary from reading
        its current state until its next state is written (`partition_lock`)."""
        return self.locks_dir / f"date={run_date.isoformat()}" / f"model={quote_part(model)}.lock"

    @property
    def readers_lock_file(self) -> Path:
        """Readers that resolve data files themselves (not through results.duckdb) hold this
        shared while they read; compaction deletes files only while holding it exclusively."""
        return self.root / ".store-readers.lock"

    @property
    def publishing_lock_file(self) -> Path:
        """Held by the one process of a machine that publishes results.duckdb."""
        return self.root / ".results.lock"

    @property
    def compaction_lock_file(self) -> Path:
        """Held by the one compaction running; the others skip."""
        return self.root / ".compact.lock"

    def journal_path(self, table: str, model: str, run_date: date, materialization_id: str) -> Path:
        return (
            self.journal_dir
            / table
            / f"date={run_date.isoformat()}"
            / f"model={quote_part(model)}"
            / f"{materialization_id}.jsonl"
        )

"""Results on disk: immutable Parquet per table and partition, a run journal, and results.duckdb views."""

from eval_pipeline.store._cache import FileCompletionCache
from eval_pipeline.store._compact import CompactionReport, compact_store
from eval_pipeline.store._database import (
    StoreBusy,
    connect,
    ensure_database,
    fetch,
    query,
    view_statements,
)
from eval_pipeline.store._files import (
    Journal,
    abandoned_journals,
    current_generation,
    ensure_schema_files,
    journal_files,
    latest_file,
    latest_sources,
    new_materialization_id,
    read_journals,
    read_latest,
    reading_files,
    remove_files,
    updating_partition,
    write_rows,
)
from eval_pipeline.store._layout import TABLES, StoreLayout, TableSpec, quote_part

__all__ = [
    "TABLES",
    "CompactionReport",
    "FileCompletionCache",
    "Journal",
    "StoreBusy",
    "StoreLayout",
    "TableSpec",
    "abandoned_journals",
    "compact_store",
    "connect",
    "current_generation",
    "ensure_database",
    "ensure_schema_files",
    "fetch",
    "journal_files",
    "latest_file",
    "latest_sources",
    "new_materialization_id",
    "query",
    "quote_part",
    "read_journals",
    "read_latest",
    "reading_files",
    "remove_files",
    "updating_partition",
    "view_statements",
    "write_rows",
]

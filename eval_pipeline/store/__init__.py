"""Results on disk or in a bucket: immutable Parquet per table and partition, a run journal, SQL views over them, and results.duckdb (a published copy)."""

from eval_pipeline.store._cache import FileCompletionCache
from eval_pipeline.store._compact import CompactionReport, compact_store
from eval_pipeline.store._damage import (
    DamagedFile,
    awaiting_rerun,
    latest_table,
    needs_rerun,
    quarantine_damaged,
    quarantine_day,
    quarantined,
    read_latest,
    with_recovery,
)
from eval_pipeline.store._database import (
    batches,
    connect,
    fetch,
    one_connection,
    query,
    reading_config,
    table_names,
    view_statements,
)
from eval_pipeline.store._disk import StoreFull, writing_below
from eval_pipeline.store._files import (
    JournaledPartition,
    current_generation,
    day_state,
    ensure_schema_files,
    journal_files,
    latest_file,
    latest_sources,
    read_journals,
    require_storable_rows,
    stored_form,
    write_rows,
)
from eval_pipeline.store._history import (
    GradesHistory,
    graded_days,
    latest_graded_day,
    models_graded_on,
    previous_graded_day,
)
from eval_pipeline.store._json import decode_json, decode_json_rows
from eval_pipeline.store._locks import (
    file_lock,
    reading_files,
    try_file_lock,
    updating_partition,
)
from eval_pipeline.store._objects import files_below, fsspec_spec
from eval_pipeline.store._objects import register as register_filesystem
from eval_pipeline.store._published import (
    STORAGE_VERSION,
    ensure_database,
    publish_results,
    published_current,
)
from eval_pipeline.store._sandbox import (
    TABLE_LISTING,
    NotReadOnly,
    QueryTooSlow,
    ReadLimits,
    fetch_read_only,
    head_read_only,
)
from eval_pipeline.store._state_folder import StateFolder, quote_part
from eval_pipeline.store._tables import TABLES, TableSpec

__all__ = [
    "STORAGE_VERSION",
    "TABLES",
    "TABLE_LISTING",
    "CompactionReport",
    "DamagedFile",
    "FileCompletionCache",
    "GradesHistory",
    "JournaledPartition",
    "NotReadOnly",
    "QueryTooSlow",
    "ReadLimits",
    "StateFolder",
    "StoreFull",
    "TableSpec",
    "awaiting_rerun",
    "batches",
    "compact_store",
    "connect",
    "current_generation",
    "day_state",
    "decode_json",
    "decode_json_rows",
    "ensure_database",
    "ensure_schema_files",
    "fetch",
    "fetch_read_only",
    "file_lock",
    "files_below",
    "fsspec_spec",
    "graded_days",
    "head_read_only",
    "journal_files",
    "latest_file",
    "latest_graded_day",
    "latest_sources",
    "latest_table",
    "models_graded_on",
    "needs_rerun",
    "one_connection",
    "previous_graded_day",
    "publish_results",
    "published_current",
    "quarantine_damaged",
    "quarantine_day",
    "quarantined",
    "query",
    "quote_part",
    "read_journals",
    "read_latest",
    "reading_config",
    "reading_files",
    "register_filesystem",
    "require_storable_rows",
    "stored_form",
    "table_names",
    "try_file_lock",
    "updating_partition",
    "view_statements",
    "with_recovery",
    "write_rows",
    "writing_below",
]

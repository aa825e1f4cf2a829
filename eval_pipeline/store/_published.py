"""`results.duckdb`: the store published as real tables, for any DuckDB client from any folder.

The file holds a copy of every table of the SQL surface (`<table>`, `<table>_history`,
`<table>_latest`), not views over the Parquet files: views name their files by path, which a
DuckDB client resolves from its working folder (so they answered from `.eval/` only), and an
absolute path would let a copied suite read the original's data. Tables answer the same from
any folder, after a copy or a move, and only ever with this suite's data.

It is rebuilt whole under a temporary name and renamed over the published one, never opened
read-write in place (DuckDB's read-write connection would lock out every reader, and a
reader's would fail the writer): a session holding the file open keeps the snapshot it opened
(the old file lives on until it closes), the next one opens the new file. It is written in an
older storage format (`STORAGE_VERSION`) so that clients older than this library read it.

A bucket store is published the same way into the local file: its tables are read from the
bucket (the whole store, each time), so a bare DuckDB client needs no S3 access.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._database import connect, table_names
from eval_pipeline.store._disk import writing_below
from eval_pipeline.store._files import current_generation, ensure_schema_files
from eval_pipeline.store._locks import next_publication, publishing_lock
from eval_pipeline.store._objects import files_below
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES

# Readable by every DuckDB release since 1.0 (June 2024), including the 1.x line before the
# library's own 2.0, whose default format those cannot open ("version number 69").
STORAGE_VERSION = "v1.0.0"

# Bump when what the file holds changes; it is then rebuilt at the next publication.
PUBLISHED_VERSION = 1


def _store_state(layout: StateFolder) -> str:
    """A token of the store's content as files: it changes with every file written, set
    aside or compacted (names are unique and files immutable, so listing them is enough)."""
    root = layout.tables_dir
    names = [str(current_generation(layout))]
    for path in files_below(root):
        # A local store's names relative to it: a copied suite's file stays current.
        names.append(path.relative_to(root).as_posix() if isinstance(path, Path) else str(path))
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def _marker_text(layout: StateFolder, state: str) -> str:
    return json.dumps(
        {
            "version": PUBLISHED_VERSION,
            "storage_version": STORAGE_VERSION,
            # A bucket's file is named by its URL; a local store's is relative (a copied
            # suite's file is its own data, still current).
            **({"store": layout.location} if layout.remote else {}),
            "state": state,
            # A release that adds a table or a column publishes it at once.
            "tables": {name: spec.schema.names for name, spec in sorted(TABLES.items())},
        }
    )


def _current(layout: StateFolder, marker: str) -> bool:
    published = layout.published_marker
    return layout.database.exists() and published.exists() and published.read_text() == marker


def published_current(layout: StateFolder) -> bool:
    """Whether results.duckdb holds the store as it is now."""
    return _current(layout, _marker_text(layout, _store_state(layout)))


def publish_results(layout: StateFolder, *, force: bool = False) -> bool:
    """Rebuild results.duckdb from the store unless it is current; True when rebuilt.

    One process of a machine publishes at a time and one more waits for it; any other
    returns at once (False), since the waiting one reads the store once the current one is
    done, after this caller's writes. So parallel evaluations (a backfill) rebuild the file
    about once per rebuild time, not once each. Never waits on a reader: readers hold the
    published file, the rebuild writes a new one.
    """
    ensure_schema_files(layout)
    with contextlib.ExitStack() as publishing:
        with next_publication(layout) as waiting:
            if not waiting:
                return False
            publishing.enter_context(publishing_lock(layout))
        # Publishing now (the lock held until the end); the next caller may wait meanwhile.
        # Taken before reading: a file written meanwhile makes the next call rebuild.
        marker = _marker_text(layout, _store_state(layout))
        if not force and _current(layout, marker):
            return False
        with writing_below(layout.root):
            with_recovery(layout, lambda: _rebuild(layout))
            _write_text(layout.published_marker, marker)
        return True


#: Rows of a row group of results.duckdb (a multiple of DuckDB's vector of 2,048 rows).
_ROW_GROUP_ROWS = 16_384


def _rebuild(layout: StateFolder) -> None:
    target = layout.database
    # A publication killed mid-way left its temporary file (and WAL): under the publishing
    # lock no other is being written.
    for left in target.parent.glob(f".{target.name}.*.tmp*"):
        if left.is_dir():  # what DuckDB spilled
            shutil.rmtree(left, ignore_errors=True)
        else:
            left.unlink(missing_ok=True)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    spill = temporary.with_name(temporary.name + ".spill")
    try:
        with connect(layout) as connection:
            connection.execute("SET enable_progress_bar = false")
            # What it spills goes beside the file it writes, never to the working folder. (A
            # memory limit would not do: the checkpoint of a large history fails under it.)
            connection.execute(f"SET temp_directory = {_sql_string(spill.as_posix())}")
            # Row groups of 16,384 rows, not DuckDB's 122,880: it holds a row group whole
            # while it compresses it, so this bounds what publishing adds to the command's
            # memory whatever the history holds (90 MB for 5,000 runs rather than 160; the
            # file 4 % larger).
            connection.execute(
                f"ATTACH {_sql_string(temporary.as_posix())} AS published "
                f"(STORAGE_VERSION '{STORAGE_VERSION}', ROW_GROUP_SIZE {_ROW_GROUP_ROWS})"
            )
            for name in table_names():
                connection.execute(f"CREATE TABLE published.{name} AS SELECT * FROM memory.{name}")
            connection.execute("DETACH published")  # checkpoints: no WAL is left beside it
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        # A WAL beside the published file would be replayed into the new one: it can only
        # be left by a read-write session on the old file, which is replaced anyway.
        target.with_name(target.name + ".wal").unlink(missing_ok=True)
        os.replace(temporary, target)  # open readers keep the old file until they close it
        _fsync_folder(target.parent)
        # What said which views the file held, before it held tables (an older release).
        target.with_name("results.views.json").unlink(missing_ok=True)
    finally:
        temporary.unlink(missing_ok=True)
        temporary.with_name(temporary.name + ".wal").unlink(missing_ok=True)
        shutil.rmtree(spill, ignore_errors=True)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _write_text(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def ensure_database(layout: StateFolder) -> None:
    """Create the store's folders and schema files and make results.duckdb current."""
    publish_results(layout)

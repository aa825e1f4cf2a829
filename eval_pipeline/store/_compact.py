"""Compaction: fold the many small files of past materializations into two segments per table.

DuckDB spends about 0.2 ms per file it opens, so after a year (thousands of partition files
per table) every query pays seconds however few rows it needs. Compaction keeps the store's
rules (files are immutable, written to a temp name then renamed; readers never wait on
writers) and goes in steps, each safe to interrupt:

1. Pick a cutoff C, by default ten minutes ago: file names carry the moment they were
   written, so every file named before C is complete (writes take well under a second) and
   a materialization in flight only writes files named after C.
2. Per table, write `_segments/<table>/<C>_history.parquet` (every row of every file named
   before C) and `<C>_current.parquet` (each partition's rows from its newest file before C,
   with the partition in `_partition`), folding the previous generation's segments in.
   Rows keep their `written_at` and `materialization_id`.
3. Write the new generation: from then on the views read the files named >= C, plus the
   segments for the rest. results.duckdb is not touched: it holds copies of the rows, which
   compaction does not change (the next publication rebuilds it from the new generation).
4. Delete what no view reads any more: the files named before C and the previous segments,
   while holding the readers lock exclusively (every reader of the files holds it shared:
   the views in memory, the viewer, `read_latest`, a publication). If they hold it too
   long, the deletion waits for the next compaction: such files are ignored by every reader
   that starts meanwhile. The partition folders left empty go too: every `**` glob of the
   views and every listing of the store would walk them (12k after a year).

In a bucket store, readers on other machines hold no lock this process could wait for, and
may still read through the views of the previous generation: step 4 deletes only what
neither the new generation nor the previous one reads (files named before the previous
cutoff, older segments), one compaction late.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import duckdb
import pyarrow as pa

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._files import (
    _stamp,
    current_generation,
    ensure_schema_files,
    write_generation,
)
from eval_pipeline.store._locks import compaction_lock, deleting_files
from eval_pipeline.store._objects import (
    children,
    files_below,
    put_local_file,
    register,
    remove,
    remove_empty_folders,
    staging_file,
)
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES

# Files written in the last few minutes are left alone: a write in flight is never folded.
SAFETY_MARGIN = timedelta(minutes=10)


@dataclass
class TableCompaction:
    files: int  # data files folded into the new segments (besides the previous segments)
    current_rows: int
    history_rows: int


@dataclass
class CompactionReport:
    status: Literal["compacted", "nothing", "busy"]
    cutoff: str | None
    message: str
    tables: dict[str, TableCompaction] = field(default_factory=dict)
    deleted: int = 0  # files and old segments deleted
    deletion_deferred: bool = False  # readers kept the readers lock; the next run deletes


def _sql(value: str | Path) -> str:
    text = value if isinstance(value, str) else value.as_posix()
    return "'" + text.replace("'", "''") + "'"


def _copy(connection: duckdb.DuckDBPyConnection, select: str, target: Path) -> int:
    """Write a query's rows to `target` atomically (temp name, fsync, rename; in a bucket a
    local file, then one upload); its row count."""
    temporary = staging_file(target)
    try:
        connection.execute(
            f"COPY ({select}) TO {_sql(temporary)} (FORMAT parquet, COMPRESSION zstd, "
            "ROW_GROUP_SIZE 20000)"
        ).fetchall()
        put_local_file(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return connection.execute(f"SELECT count(*) FROM read_parquet({_sql(target)})").fetchall()[0][0]


def _columns(connection: duckdb.DuckDBPyConnection, name: str, source: str) -> str:
    """The table's columns that `source` has, in schema order (so the segments carry its
    schema). Files and segments written before a column was added lack it: UNION ALL BY
    NAME fills it with NULL for their rows."""
    present = {row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    return ", ".join(f'"{f.name}"' for f in TABLES[name].schema if f.name in present)


def _compact_table(
    connection: duckdb.DuckDBPyConnection,
    layout: StateFolder,
    name: str,
    files: list[Path],
    previous: str | None,
    cutoff: str,
) -> TableCompaction:
    spec = TABLES[name]
    # The schema file comes first, so the union has every column of the table's schema.
    listed = ", ".join(_sql(p) for p in [layout.empty_file(name), *files])
    read = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false, filename = true)"
    columns = _columns(connection, name, read)
    history_parts = [f"SELECT {columns} FROM {read}"]
    # A table added since the previous generation has no segments of it.
    if previous is not None and not layout.segment(name, previous, "history").exists():
        previous = None
    if previous is not None:
        segment = f"read_parquet({_sql(layout.segment(name, previous, 'history'))})"
        history_parts.append(f"SELECT {_columns(connection, name, segment)} FROM {segment}")
    history_rows = _copy(
        connection,
        " UNION ALL BY NAME ".join(history_parts),
        layout.segment(name, cutoff, "history"),
    )
    if spec.partitioning == "append":
        return TableCompaction(len(files), 0, history_rows)

    # Each partition's newest file before the cutoff (file names sort by write time).
    newest: dict[str, Path] = {}
    for path in files:
        key = path.parent.relative_to(layout.table_dir(name)).as_posix()
        key = "" if key == "." else key
        if key not in newest or path.name > newest[key].name:
            newest[key] = path
    # Typed, so that a table with no file yet still gets a text `_partition`, not NULLs.
    picked = pa.table(
        {
            "_picked_file": [p.as_posix() for p in newest.values()],
            "_picked_partition": list(newest),
        },
        schema=pa.schema([("_picked_file", pa.string()), ("_picked_partition", pa.string())]),
    )
    connection.register("picked", picked)
    current_parts = [
        f"SELECT {columns}, _picked_partition AS _partition FROM {read} "
        "JOIN picked ON filename = _picked_file"
    ]
    if previous is not None:
        # Partitions not written since the previous generation keep its rows.
        segment = f"read_parquet({_sql(layout.segment(name, previous, 'current'))})"
        current_parts.append(
            f"SELECT {_columns(connection, name, segment)}, _partition FROM {segment} "
            "WHERE _partition NOT IN (SELECT _picked_partition FROM picked)"
        )
    current_rows = _copy(
        connection,
        " UNION ALL BY NAME ".join(current_parts) + " ORDER BY _partition",
        layout.segment(name, cutoff, "current"),
    )
    connection.unregister("picked")
    return TableCompaction(len(files), current_rows, history_rows)


def data_files_names(names: list[str]) -> list[str]:
    """The data-file names among a folder's entries (not the schema file, nor temp files)."""
    return [n for n in names if n.endswith(".parquet") and not n.startswith((".", "_"))]


def _segment_files(layout: StateFolder, name: str) -> list[Path]:
    return [p for p in children(layout.segments_root / name) if p.name.endswith(".parquet")]


def compact_store(
    layout: StateFolder,
    *,
    before: datetime | None = None,
    readers_wait_s: float = 30.0,
) -> CompactionReport:
    """Fold every data file written before `before` (default: ten minutes ago) into one
    generation of segments per table, point the views at it, then delete the folded files.

    Never waits long: while another compaction runs, it stops with nothing changed (status
    "busy"); when readers keep reading files for `readers_wait_s`, the folded files stay
    until the next compaction (no reader that starts meanwhile reads them).
    A damaged file is set aside (`quarantine`) and the compaction starts again without it.
    """
    return with_recovery(
        layout,
        lambda: _compact(layout, before=before, readers_wait_s=readers_wait_s),
    )


def _compact(
    layout: StateFolder, *, before: datetime | None, readers_wait_s: float
) -> CompactionReport:
    ensure_schema_files(layout)
    moment = before or datetime.now(UTC) - SAFETY_MARGIN
    cutoff = _stamp(moment.astimezone(UTC))
    with compaction_lock(layout) as locked:
        if not locked:
            return CompactionReport("busy", None, "another compaction is running; try later")
        previous = current_generation(layout)
        if previous is not None and cutoff <= previous:
            return CompactionReport("nothing", previous, f"already compacted up to {previous}")
        # Every data file named before the cutoff; those before the previous cutoff are
        # already in its segments (left over from a deferred deletion).
        before_cutoff: dict[str, list[Path]] = {}
        for name in TABLES:
            found = files_below(layout.table_dir(name))
            before_cutoff[name] = [
                p for p in found if data_files_names([p.name]) and p.name < cutoff
            ]
        to_fold = {
            name: [p for p in paths if previous is None or p.name >= previous]
            for name, paths in before_cutoff.items()
        }
        if previous is not None and not any(to_fold.values()):
            return CompactionReport(
                "nothing", previous, "no file written since the last compaction"
            )

        report = CompactionReport("compacted", cutoff, "")
        written: list[Path] = []
        try:
            with duckdb.connect(":memory:") as connection:
                register(connection, layout.tables_dir)
                for name in TABLES:
                    written += [
                        layout.segment(name, cutoff, kind) for kind in ("history", "current")
                    ]
                    report.tables[name] = _compact_table(
                        connection, layout, name, to_fold[name], previous, cutoff
                    )
            # From here the new generation is the store's truth.
            write_generation(layout, cutoff)
        except BaseException:
            if current_generation(layout) != cutoff:
                remove(written)
            raise

        # Safe to delete once no reader holds the readers lock: a reader that takes it from
        # now on builds the new generation's views, whose constant file-name filter prunes
        # the files named before the cutoff from the glob's list before any is opened.
        # A bucket store keeps what the previous generation's views read (see above).
        kept = {cutoff, previous} if layout.remote else {cutoff}
        garbage = [
            p
            for paths in before_cutoff.values()
            for p in paths
            if not layout.remote or (previous is not None and p.name < previous)
        ]
        garbage += [
            p
            for name in TABLES
            for p in _segment_files(layout, name)
            if not any(p.name.startswith(f"{k}_") for k in kept if k is not None)
        ]
        with deleting_files(layout, wait_s=readers_wait_s) as may_delete:
            if may_delete:
                remove(garbage)
                for name in TABLES:
                    remove_empty_folders(layout.table_dir(name))
                report.deleted = len(garbage)
            else:
                report.deletion_deferred = True
        folded = sum(t.files for t in report.tables.values())
        report.message = (
            f"compacted {folded:,} files written before {cutoff} into one generation of "
            f"segments; deleted {report.deleted:,} files"
            + (" (deletion deferred: readers busy)" if report.deletion_deferred else "")
        )
        return report

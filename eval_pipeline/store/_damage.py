"""Damaged store files: found when a read fails (or by a check), set aside in quarantine, reported once."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from eval_pipeline.store._disk import disk_full
from eval_pipeline.store._files import (
    _write_atomically,
    data_files,
    ensure_schema_files,
)
from eval_pipeline.store._files import (
    latest_table as _latest_table,
)
from eval_pipeline.store._objects import (
    append_record,
    files_below,
    is_remote,
    move,
    parquet_file,
    record_lines,
)
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES
from eval_pipeline.store._unanswered import (
    StoreUnavailable,
    answering,
    is_silent,
    unanswered,
    unavailable,
)

log = logging.getLogger("eval_pipeline.store")

T = TypeVar("T")

# Each recovery moves at least one file, so this bounds the retries of one read, not the
# number of damaged files a store may hold (a read names the next one on its next try).
_MAX_RECOVERIES = 50

# DuckDB names the file in most messages about a bad Parquet file ("No magic bytes found at
# end of file '…'", "Failed to read file \"…\"") but not in all (a bad page header says only
# "don't know what type"): then every file is checked.
_NAMED_FILE = re.compile(r"""['"]([^'"]+\.parquet)['"]""")


@dataclass(frozen=True)
class DamagedFile:
    """A store file that cannot be read, and where it went."""

    file: str  # where it was, relative to the state folder (or the bucket prefix)
    table: str
    partition: str  # `date=…/model=…`; '' for an unpartitioned table; 'compacted segment'
    reason: str
    moved_to: str | None  # relative to the state folder; None while it is still in place
    found_at: str

    def describe(self) -> str:
        where = f"table {self.table}" + (f", partition {self.partition}" if self.partition else "")
        return f"{self.file} ({where}): {self.reason}"


def parquet_problem(path: Path, *, full: bool = True) -> str | None:
    """Why `path` cannot be read as Parquet (None when it can). `full` reads every page;
    otherwise only the footer (metadata), which finds garbage and truncation cheaply."""
    try:
        with answering(path):  # a bucket that does not answer is not a damaged file
            parquet = parquet_file(path)
            if full:
                parquet.read()
    except StoreUnavailable:
        raise
    except FileNotFoundError:
        return None  # set aside meanwhile by another reader
    except (pa.ArrowException, OSError, ValueError) as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return None


def store_files(layout: StateFolder) -> list[Path]:
    """Every Parquet file the views may read: data, schema files and compacted segments."""
    return files_below(layout.tables_dir)


def _where(layout: StateFolder, path: Path) -> tuple[str, str]:
    parts = path.relative_to(layout.tables_dir).parts
    if parts[0] == layout.segments_root.name:
        return parts[1], "compacted segment"
    return parts[0], "/".join(parts[1:-1])


def _relative(layout: StateFolder, path: Path) -> str:
    return path.relative_to(layout.objects_root).as_posix()


def _replace_with_empty(layout: StateFolder, path: Path, table: str) -> None:
    """Views name schema files and segments explicitly: an empty one keeps them working."""
    if path.name == layout.empty_file(table).name:
        ensure_schema_files(layout)
        return
    schema = TABLES[table].schema
    if path.stem.endswith("_current"):
        schema = schema.append(pa.field("_partition", pa.string()))
    _write_atomically(schema.empty_table(), path)


def quarantine(layout: StateFolder, path: Path, reason: str) -> DamagedFile | None:
    """Move a damaged file into the quarantine folder, record it and warn once (None when
    another process moved it first). A compacted segment or schema file is replaced by an
    empty one, since the views name them; a partition file is not, so the partition shows
    its previous write until it is rerun."""
    table, partition = _where(layout, path)
    target = layout.quarantine_dir / path.relative_to(layout.tables_dir).as_posix()
    if target.exists():
        target = target.with_name(f"{target.stem}.{datetime.now(UTC):%Y%m%dT%H%M%S%f}.parquet")
    if not move(path, target):
        return None
    if partition == "compacted segment" or path.name == layout.empty_file(table).name:
        _replace_with_empty(layout, path, table)
    damaged = DamagedFile(
        file=_relative(layout, path),
        table=table,
        partition=partition,
        reason=reason,
        moved_to=_relative(layout, target),
        found_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    append_record(layout.quarantine_records, json.dumps(asdict(damaged), ensure_ascii=False) + "\n")
    log.warning(
        "warning: damaged store file set aside: %s; moved to %s. %s",
        damaged.describe(),
        damaged.moved_to,
        _mend(damaged),
    )
    return damaged


def _mend(damaged: DamagedFile) -> str:
    """What brings a damaged file's rows back (an evaluation of its day does it on its own)."""
    if damaged.partition == "compacted segment":
        return "Its days show no rows until evaluated again (eval-pipeline test --date …)."
    if Path(damaged.file).name.startswith("_"):
        return "An empty one replaces it."
    day = re.search(r"date=(\d{4}-\d{2}-\d{2})", damaged.partition)
    if day is None:
        return "The next evaluation rewrites it."
    return f"eval-pipeline test --date {day.group(1)} rebuilds it from what the store holds."


def quarantined(layout: StateFolder) -> list[DamagedFile]:
    """Every file set aside so far, oldest first."""
    path = layout.quarantine_records
    if not path.exists():
        return []
    records = []
    for line in record_lines(path):
        try:
            records.append(DamagedFile(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # a torn line
    return records


def needs_rerun(layout: StateFolder, damaged: DamagedFile) -> bool:
    """Whether the damaged file was its partition's latest and nothing was written since.
    (A compacted segment's rows cannot be rewritten as such: rerun the days you need.)"""
    if damaged.partition == "compacted segment" or Path(damaged.file).name.startswith("_"):
        return False
    path = layout.objects_root / damaged.file
    return not any(p.name > path.name for p in data_files(path.parent))


def awaiting_rerun(
    layout: StateFolder, *, run_date: date | None = None, models: Sequence[str] = ()
) -> list[DamagedFile]:
    """The files set aside whose partition still shows the write before them (`needs_rerun`),
    one per partition, oldest first; with `run_date`, only that day's partitions (its
    models' among the model tables, `models`)."""
    keys: set[str] | None = None
    if run_date is not None:
        keys = {
            layout.partition_key(table, model=model, run_date=run_date)
            for table, model in _day_partitions(models)
        }
    found: dict[tuple[str, str], DamagedFile] = {}
    for damaged in quarantined(layout):
        if keys is not None and damaged.partition not in keys:
            continue
        if needs_rerun(layout, damaged):
            found.setdefault((damaged.table, damaged.partition), damaged)
    return list(found.values())


def quarantine_day(layout: StateFolder, run_date: date, models: Sequence[str]) -> list[DamagedFile]:
    """Read the footer of the current file of each partition of `run_date` (its `models`'
    among the model tables) and set aside the damaged ones: what an evaluation of the day
    reads back, checked in a few milliseconds whatever the history holds (the views would
    find them only when a query first reads their table). What was set aside now."""
    found = []
    for table, model in _day_partitions(models):
        files = data_files(layout.partition_dir(table, model=model, run_date=run_date))
        if not files:
            continue
        reason = parquet_problem(files[-1], full=False)
        if reason is not None and (damaged := quarantine(layout, files[-1], reason)):
            found.append(damaged)
    return found


def _day_partitions(models: Sequence[str]) -> list[tuple[str, str | None]]:
    """(table, model) of each partition a day has: its own of each table by date (model
    None), and each of `models`' of each table by model and date."""
    found: list[tuple[str, str | None]] = []
    for table, spec in TABLES.items():
        if spec.partitioning == "date":
            found.append((table, None))
        elif spec.partitioning == "model_date":
            found += [(table, model) for model in models]
    return found


def quarantine_damaged(layout: StateFolder, *, full: bool = True) -> list[DamagedFile]:
    """Read every store file (`full`: every page; else the footers) and set aside the
    damaged ones; what was set aside now."""
    found = []
    for path in store_files(layout):
        reason = parquet_problem(path, full=full)
        if reason is not None:
            damaged = quarantine(layout, path, reason)
            if damaged is not None:
                found.append(damaged)
    return found


def recover(layout: StateFolder, error: BaseException) -> list[DamagedFile]:
    """Set aside the damaged files that made a read fail: the files the error names when it
    names any in the store, else whatever a check of every file finds. Empty when none is
    damaged (the error has another cause)."""
    named = []
    for match in _NAMED_FILE.findall(str(error)):
        if is_remote(layout.tables_dir):
            prefix = layout.location + "/"
            path = layout.tables_dir / match[len(prefix) :] if match.startswith(prefix) else None
        else:
            # The views name files relative to the state folder (`view_statements`)
            path = (layout.root / match).resolve()
            path = path if path.is_relative_to(layout.tables_dir.resolve()) else None
        if path is not None and path.exists():
            named.append(path)
    found = []
    for path in named:
        reason = parquet_problem(path)
        if reason is not None and (damaged := quarantine(layout, path, reason)):
            found.append(damaged)
    if found or named:
        return found
    return quarantine_damaged(layout, full=False) or quarantine_damaged(layout, full=True)


def _may_be_damage(error: BaseException) -> bool:
    if isinstance(error, StoreUnavailable) or disk_full(error):
        return False
    if isinstance(error, duckdb.Error):
        # Parser, binder, catalog, conversion… errors are the query's; these are the file's.
        return type(error) in (duckdb.Error, duckdb.InvalidInputException, duckdb.IOException)
    return isinstance(error, (pa.ArrowException, OSError))


def with_recovery(layout: StateFolder, action: Callable[[], T]) -> T:
    """`action()`, retried after setting aside the damaged files that made it fail, so one
    damaged file never stops a read of the rest. Other errors are raised as they are."""
    for _ in range(_MAX_RECOVERIES):
        try:
            return action()
        except Exception as error:
            if layout.remote and (unanswered(error) or is_silent(layout.tables_dir)):
                # A bucket that did not answer: no file to check (each check would wait too).
                raise unavailable(layout.tables_dir, error) from error
            if not _may_be_damage(error) or not recover(layout, error):
                raise
    return action()


def read_latest(
    layout: StateFolder,
    table: str,
    *,
    model: str | None = None,
    run_date: date | None = None,
    leaving_out: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """`read_latest` that sets aside a damaged file and reads the partition's previous state."""
    return latest_table(
        layout, table, model=model, run_date=run_date, leaving_out=leaving_out
    ).to_pylist()


def latest_table(
    layout: StateFolder,
    table: str,
    *,
    model: str | None = None,
    run_date: date | None = None,
    leaving_out: Sequence[str] = (),
) -> pa.Table:
    """`latest_table` that sets aside a damaged file and reads the partition's previous state."""
    return with_recovery(
        layout,
        lambda: _latest_table(
            layout, table, model=model, run_date=run_date, leaving_out=leaving_out
        ),
    )

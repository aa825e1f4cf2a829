"""Immutable Parquet files per table and partition, and the journal that keeps runs as they finish until written."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eval_pipeline.store import _objects
from eval_pipeline.store._journal import Journal
from eval_pipeline.store._locks import (
    journal_in_use,
    reading_files,
    updating_partition,
)
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES
from eval_pipeline.suite import IDENTITY_FIELDS, first_line, redact_value

log = logging.getLogger("eval_pipeline.store")


def new_materialization_id() -> str:
    return uuid.uuid4().hex[:12]


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%S%fZ")


def stored_form(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """`row` (changed in place) with its JSON columns as the text the store keeps, as
    `write_rows` would write them: many rows kept until they are written hold a string
    each rather than its nested values."""
    for name in TABLES[table].json_columns:
        row[name] = _json_text(row.get(name))
    return row


def _json_text(value: Any) -> Any:
    """A JSON column's value as stored: text (a str is taken as JSON already), or None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def _columns(table: str, rows: Sequence[dict[str, Any]], extra: dict[str, Any]) -> dict:
    spec = TABLES[table]
    json_columns = spec.json_columns
    columns: dict[str, list[Any]] = {field.name: [] for field in spec.schema}
    for row in rows:
        unknown = set(row) - set(columns)
        if unknown:
            raise ValueError(f"table {table} has no column(s) {sorted(unknown)}")
        for name, values in columns.items():
            value = extra[name] if name in extra else row.get(name)
            if name in json_columns:
                value = _json_text(value)
            # No piece of a known secret is ever stored; what names the row stays as written.
            values.append(value if name in IDENTITY_FIELDS else redact_value(value))
    return columns


def _to_arrow(table: str, rows: Sequence[dict[str, Any]], extra: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pydict(_columns(table, rows, extra), schema=TABLES[table].schema)


def require_storable_rows(table: str, rows: Sequence[dict[str, Any]]) -> None:
    """Convert rows as `write_rows` does, writing nothing, so a caller holding rows from
    outside (an imported file) can refuse them before it writes any of them.

    Raises:
        ValueError: naming the first column that cannot hold its value, and why.
    """
    extra = {"written_at": datetime.now(UTC), "materialization_id": "check"}
    schema = TABLES[table].schema
    for name, values in _columns(table, rows, extra).items():
        try:
            pa.array(values, type=schema.field(name).type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as error:
            raise ValueError(f"{name}: {first_line(str(error))}") from None


def _write_atomically(table: pa.Table, path: Path) -> None:
    _objects.write_parquet(table, path)  # readers see the whole file or none of it


#: Rows of a partition written at once (a row group of its file): more are written in batches.
_BATCH_ROWS = 2048


def write_rows(
    layout: StateFolder,
    table: str,
    rows: Sequence[dict[str, Any]],
    *,
    model: str | None = None,
    run_date: date | None = None,
    materialization_id: str | None = None,
    written_at: datetime | None = None,
) -> Path:
    """Write a partition's complete current rows as one new immutable file.

    The newest file of a partition is its current state (the views pick it); older files
    stay as history, so a reader never sees a half-written or vanished file.
    """
    moment = written_at or datetime.now(UTC)
    ident = materialization_id or new_materialization_id()
    extra = {"written_at": moment, "materialization_id": ident}
    path = (
        layout.partition_dir(table, model=model, run_date=run_date)
        / f"{_stamp(moment)}_{ident}.parquet"
    )
    if len(rows) <= _BATCH_ROWS:
        _write_atomically(_to_arrow(table, rows, extra), path)
        return path
    schema = TABLES[table].schema

    def batches() -> Iterator[pa.RecordBatch]:
        # A large partition (thousands of runs) a batch at a time: Arrow and the Parquet
        # writer hold one batch, not a copy of every row.
        for start in range(0, len(rows), _BATCH_ROWS):
            chunk = rows[start : start + _BATCH_ROWS]
            yield pa.RecordBatch.from_pydict(_columns(table, chunk, extra), schema=schema)

    _objects.write_parquet(batches, path, schema)
    return path


def ensure_schema_files(layout: StateFolder) -> None:
    """A zero-row file per table, so `read_parquet` globs always match and carry the schema."""
    for name, spec in TABLES.items():
        path = layout.empty_file(name)
        # Rewritten when a table gained a column since (a store from an older version), so
        # the views know the column before any data file holds it. (The first request of
        # most commands to a bucket: one that does not answer is named here.)
        with _objects.answering(path):
            if not path.exists() or not _has_columns(path, spec.schema.names):
                _write_atomically(spec.schema.empty_table(), path)


def _has_columns(path: Path, names: Sequence[str]) -> bool:
    try:
        return set(names) <= set(_objects.read_schema(path).names)
    except (OSError, pa.ArrowInvalid):
        return False


def current_generation(layout: StateFolder) -> str | None:
    """The cutoff (a file-name timestamp) of the current compaction generation, if any.

    Data files named before it live on in its segments (and are deleted once the views no
    longer read them); files named at or after it are read from the partition folders."""
    try:
        return json.loads(layout.generation_file.read_text())["cutoff"]
    except FileNotFoundError:
        return None


def write_generation(layout: StateFolder, cutoff: str) -> None:
    _objects.write_text(layout.generation_file, json.dumps({"cutoff": cutoff}))


def data_files(folder: Path) -> list[Path]:
    """A folder's data files (not the schema file, nor temp files), oldest first."""
    return [
        p
        for p in _objects.children(folder)
        if p.suffix == ".parquet" and not p.name.startswith((".", "_"))
    ]


def latest_file(
    layout: StateFolder, table: str, *, model: str | None = None, run_date: date | None = None
) -> Path | None:
    """A partition's newest data file still read from its folder: None when it was never
    written, or when its newest write is older than the current compaction generation (its
    rows are then in the generation's current segment; `latest_table` and `latest_sources`
    read them there)."""
    files = data_files(layout.partition_dir(table, model=model, run_date=run_date))
    cutoff = current_generation(layout)
    if files and (cutoff is None or files[-1].name >= cutoff):
        return files[-1]
    return None


def _segment_rows(segment: Path, partitions: Sequence[str]) -> pa.Table:
    """The rows of some partitions in a current segment, without the `_partition` column."""
    try:
        rows = _objects.read_table(segment, filters=pc.field("_partition").isin(list(partitions)))
    except pa.ArrowTypeError:
        # A segment of a table that held no row, whose `_partition` earlier compactions wrote
        # as NULLs, not text: it holds no partition.
        rows = _objects.read_table(segment).slice(0, 0)
    return rows.drop_columns(["_partition"])


def latest_sources(
    layout: StateFolder, table: str, partitions: Iterable[tuple[str | None, date | None]]
) -> tuple[list[Path], Path | None, list[str]]:
    """Where some partitions' current rows are: their newest files, plus the current segment
    and the partition keys (`partition_key`) to read from it for partitions that have no file
    since the last compaction (None and [] before any). Call under `reading_files`."""
    cutoff = current_generation(layout)
    files, compacted = [], []
    for model, run_date in partitions:
        path = latest_file(layout, table, model=model, run_date=run_date)
        if path is not None:
            files.append(path)
        elif cutoff is not None:
            compacted.append(layout.partition_key(table, model=model, run_date=run_date))
    if cutoff is None or not compacted:
        return files, None, []
    return files, layout.segment(table, cutoff, "current"), compacted


def latest_table(
    layout: StateFolder,
    table: str,
    *,
    model: str | None = None,
    run_date: date | None = None,
    leaving_out: Sequence[str] = (),
) -> pa.Table:
    """The current rows of one partition (none when it was never written, or when its newest
    write held no row), from its newest file or, once compacted, the current segment; the
    columns `leaving_out` are not read. Arrow holds a run in a few KB, its Python values in
    several times that: `read_latest` gives those, for a partition's worth of small rows."""
    with reading_files(layout):
        files, segment, keys = latest_sources(layout, table, [(model, run_date)])
        if files:
            rows = _objects.read_table(files[0])
        elif segment is not None:
            rows = _segment_rows(segment, keys)
        else:
            return TABLES[table].schema.empty_table()
        return rows.drop_columns([c for c in leaving_out if c in rows.column_names])


def day_state(layout: StateFolder, models: Sequence[str], run_date: date) -> str:
    """A token of the files a day's results are read from: it changes when any writer (this
    machine or another, the CLI, the UI or a schedule) adds a file to one of the day's
    partitions (any model's), a journal of these models appears or goes, a file is set aside,
    or compaction starts a new generation. Data file names are unique, so listing them is
    enough: nothing is read."""
    # Every model's folders of the day, not only these models': another model's new summary
    # makes the day's leaderboard and report out of date.
    folders = [
        layout.partition_dir(table, run_date=run_date)
        for table, spec in TABLES.items()
        if spec.partitioning == "date"
    ]
    folders += [
        layout.partition_dir(table, model="x", run_date=run_date).parent
        for table, spec in TABLES.items()
        if spec.partitioning == "model_date"
    ]
    folders += [layout.journal_path("agent_runs", m, run_date, "x").parent for m in models]
    names = [str(current_generation(layout))]
    for folder in folders:
        names += [p.as_posix() for p in _objects.files_below(folder, suffix="")]
    names += [p.as_posix() for p in _objects.files_below(layout.quarantine_dir, suffix="")]
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def journal_files(layout: StateFolder, table: str, model: str, run_date: date) -> list[Path]:
    folder = layout.journal_path(table, model, run_date, "x").parent
    return [p for p in _objects.children(folder) if p.name.endswith(".jsonl")]


# A bucket journal holds no lock: one with no record for this long is taken as abandoned
# (its writer crashed). Longer than any run (limits.run_timeout_s), so a live one is kept.
BUCKET_JOURNAL_LEASE = timedelta(hours=2)


def abandoned_journals(paths: Iterable[Path]) -> list[Path]:
    """The journals no live `Journal` holds: left by a crash, or finished meanwhile."""
    found = []
    for path in paths:
        if _objects.is_remote(path):
            last = _objects.last_modified(path)
            if last is not None and datetime.now(UTC) - last > BUCKET_JOURNAL_LEASE:
                found.append(path)
        # A journal removed meanwhile (read and cleared by another evaluation) is not abandoned.
        elif path.exists() and not journal_in_use(path):
            found.append(path)
    return found


def journal_lines(paths: Iterable[Path]) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """Each journal record with its file and line number. A line that cannot be read back
    (torn by a crash mid-write, or damaged) is skipped with a warning naming it."""
    for path in paths:
        for number, line in enumerate(_objects.record_lines(path), start=1):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict):
                yield path, number, record
            elif line.strip():
                log.warning("warning: skipped %s line %d, which cannot be read back", path, number)


def read_journals(paths: Iterable[Path]) -> list[dict[str, Any]]:
    return [record for _, _, record in journal_lines(paths)]


def remove_files(paths: Iterable[Path]) -> None:
    _objects.remove(paths)


class JournaledPartition:
    """A (model, day) partition's runs written crash-safely: one attempt at making them.

    Entered, it lists the journals earlier attempts left (`journaled` reads their records:
    runs a crash would otherwise lose, for the caller to reuse). This attempt journals each
    run the moment it finishes (`journal`), then writes the partition's files (`write`, under
    `updating`). Only on leaving without an error, once it has written, does it remove its
    own journal and those no live `Journal` holds: a crash or a failed write leaves every
    journal for the next attempt, and a journal another evaluation is writing now stays.
    """

    def __init__(self, layout: StateFolder, table: str, model: str, run_date: date) -> None:
        self.layout, self.model, self.run_date = layout, model, run_date
        #: Stamped on this attempt's journal and on every file it writes.
        self.materialization_id = new_materialization_id()
        self._path = layout.journal_path(table, model, run_date, self.materialization_id)
        self._leftovers = journal_files(layout, table, model, run_date)
        self._written = False

    def journaled(self) -> Iterator[tuple[Path, int, dict[str, Any]]]:
        """The records earlier attempts journaled (`journal_lines`: a torn line is skipped)."""
        return journal_lines(self._leftovers)

    def journal(self) -> Journal:
        """This attempt's journal: open it before the first run starts, close it after the last."""
        return Journal(self._path)

    def updating(self) -> contextlib.AbstractContextManager[None]:
        """The partition lock (`updating_partition`): hold it while reading the partition's
        current rows again and writing its next ones."""
        return updating_partition(self.layout, self.model, self.run_date)

    def write(self, table: str, rows: Sequence[dict[str, Any]]) -> Path:
        """Write one table's complete current rows of the partition (`write_rows`)."""
        path = write_rows(
            self.layout,
            table,
            rows,
            model=self.model,
            run_date=self.run_date,
            materialization_id=self.materialization_id,
        )
        self._written = True
        return path

    def __enter__(self) -> JournaledPartition:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None and self._written:
            # Their runs are in the Parquet file now; a journal another evaluation is writing stays.
            remove_files([*abandoned_journals(self._leftovers), self._path])

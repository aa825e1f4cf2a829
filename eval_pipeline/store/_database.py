"""`results.duckdb`: views over the Parquet store, openable read-only by anyone at any time."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._files import current_generation, ensure_schema_files
from eval_pipeline.store._layout import StoreLayout
from eval_pipeline.store._locks import views_lock
from eval_pipeline.store._objects import register
from eval_pipeline.store._tables import TABLES

# Bump when a view's definition changes; the views are then recreated on next use.
# (5: paths relative to results.duckdb's folder, so a copied or moved suite reads at once.)
VIEWS_VERSION = 5

# How long a process reads through views of its own after finding results.duckdb held
# (rather than waiting out the lock again on every query).
_BUSY_RETRY_S = 60.0

log = logging.getLogger("eval_pipeline.store")
_busy_until: dict[Path, float] = {}


class StoreBusy(RuntimeError):
    """results.duckdb is held open read-write elsewhere, so its views cannot be refreshed now."""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _path_sql(layout: StoreLayout, path: Any) -> str:
    """A store path as a SQL string relative to results.duckdb's folder (`layout.root`).

    DuckDB resolves a relative path in a view against the connection's `file_search_path`,
    else the working folder, never against the database file's folder (measured, duckdb
    2.0.1): so every connection this package opens sets `file_search_path` to the folder
    (`reading_config`), and a person's own session runs from it or sets it too (README)."""
    if layout.remote:
        # A bucket's objects are named by their URLs (`s3://…`), the same from anywhere.
        return _sql_string(path if isinstance(path, str) else path.as_posix())
    return _sql_string(Path(path).relative_to(layout.root).as_posix())


def reading_config(layout: StoreLayout) -> dict[str, str]:
    """The DuckDB settings a connection needs to read the views (`duckdb.connect(config=…)`)."""
    return {"file_search_path": layout.root.resolve().as_posix()}


def _latest_files(layout: StoreLayout, name: str) -> str:
    """SQL listing each partition's newest file, its current state. Files are named by the
    moment they were written, so the newest is the greatest name in its folder (the rule
    `latest_file` follows), and a partition whose newest write holds no row shows no row."""
    pattern = _path_sql(layout, layout.glob(name))
    schema_file = _sql_string(layout.empty_file(name).name)
    return (
        f"SELECT max(file) FROM glob({pattern}) WHERE parse_filename(file) <> {schema_file} "
        "GROUP BY parse_dirpath(file)"
    )


def relative_dir_sql(layout: StoreLayout, name: str, column: str) -> str:
    """SQL for the partition key (`StoreLayout.partition_key`) of the file in `column`.

    The glob spells a file from wherever the path was resolved (the search path, or the
    working folder), so the key is what follows the table's folder, matched from the end: a
    key never holds the table's folder name (model ids are quoted, `quote_part`)."""
    if layout.remote:
        prefix = _sql_string(layout.table_dir(name).as_posix())
        return f"substr(parse_dirpath({column}), length({prefix}) + 2)"
    table = Path(layout.table_dir(name)).relative_to(layout.root).as_posix()
    pattern = _sql_string(f"^(.*/)?{re.escape(table)}(/(.*))?$")
    return f"regexp_extract(parse_dirpath({column}), {pattern}, 3)"


def _compacted_statements(layout: StoreLayout, name: str, cutoff: str) -> list[str]:
    """The views of one table once compacted at `cutoff`: the files named at or after the
    cutoff, plus the generation's segments for everything written before it.

    `parse_filename(filename) >= cutoff` is a constant filter on the file name, which DuckDB
    applies to the globbed list before it opens any file; and without `union_by_name` DuckDB
    reads the schema of the first file only (the table's schema file, listed first). So a
    query never opens a compacted file: compaction may delete them while queries run.
    (Hence also: a file named after the cutoff must hold every column of the schema file; a
    column added to a table shows once the files written before the change are compacted.)"""
    spec = TABLES[name]
    schema_file = _path_sql(layout, layout.empty_file(name))
    data_glob = _path_sql(layout, layout.data_glob(name))
    since = _sql_string(cutoff)
    # The whole-table glob also matches the schema file (zero rows), so it never matches
    # nothing, which `read_parquet` refuses.
    everything = _path_sql(layout, layout.glob(name))
    files = (
        f"SELECT * EXCLUDE (filename) FROM read_parquet([{schema_file}, {everything}], "
        "hive_partitioning = false, filename = true) "
        f"WHERE parse_filename(filename) >= {since}"
    )
    history = _path_sql(layout, layout.segment(name, cutoff, "history"))
    statements = [
        f"CREATE OR REPLACE VIEW {name}_history AS {files} "
        f"UNION ALL BY NAME SELECT * FROM read_parquet({history})"
    ]
    if spec.partitioning == "append":
        return statements
    current = _path_sql(layout, layout.segment(name, cutoff, "current"))
    recent = f"FROM glob({data_glob}) WHERE parse_filename(file) >= {since}"
    statements.append(
        f"CREATE OR REPLACE VIEW {name} AS {files} AND filename IN "
        f"(SELECT max(file) {recent} GROUP BY parse_dirpath(file)) "
        f"UNION ALL BY NAME SELECT * EXCLUDE (_partition) FROM read_parquet({current}) "
        f"WHERE _partition NOT IN (SELECT DISTINCT {relative_dir_sql(layout, name, 'file')} "
        f"{recent})"
    )
    return statements


def view_statements(layout: StoreLayout, cutoff: str | None = None) -> list[str]:
    """`<table>_history` (every file ever written) and `<table>` (each partition's latest file).

    An "append" table keeps every row in `<table>` too (each write is a new fact, such as a
    person's label), and `<table>_latest` holds the newest row per item (`latest_by`).
    Once the store is compacted (`compact_store`), the files written before the generation's
    cutoff are read from its two segments per table instead (`cutoff`: the current one).
    Paths are relative to results.duckdb's folder: run them with `reading_config(layout)`.
    """
    cutoff = cutoff or current_generation(layout)
    statements = []
    for name, spec in TABLES.items():
        pattern = _path_sql(layout, layout.glob(name))
        # A table added since the last compaction has no segments yet: read as uncompacted.
        compacted = cutoff is not None and layout.segment(name, cutoff, "history").exists()
        if compacted:
            statements += _compacted_statements(layout, name, cutoff)
        else:
            source = f"read_parquet({pattern}, union_by_name = true, hive_partitioning = false)"
            statements.append(f"CREATE OR REPLACE VIEW {name}_history AS SELECT * FROM {source}")
        if spec.partitioning == "append":
            statements.append(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_history")
            if spec.latest_by:
                keys = ", ".join(spec.latest_by)
                statements.append(
                    f"CREATE OR REPLACE VIEW {name}_latest AS SELECT * FROM {name}_history "
                    f"QUALIFY row_number() OVER (PARTITION BY {keys} "
                    "ORDER BY written_at DESC, materialization_id DESC) = 1"
                )
            continue
        if compacted:
            continue
        # Picking the latest files by name rather than the latest rows by a window over every
        # row reads no more than the query needs (twice as fast over a year of history).
        statements.append(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * EXCLUDE (filename) FROM read_parquet("
            f"{pattern}, union_by_name = true, hive_partitioning = false, filename = true) "
            f"WHERE filename IN ({_latest_files(layout, name)})"
        )
    return statements


def _marker_text(layout: StoreLayout) -> str:
    return json.dumps(
        {
            "version": VIEWS_VERSION,
            # A bucket store's views name it (absolute URLs); a local one's are relative,
            # so a moved suite's views stay current.
            **({"store": layout.location} if layout.remote else {}),
            "generation": current_generation(layout),
            # A table added to the store (a new release) needs its views.
            "tables": sorted(TABLES),
        }
    )


def ensure_database(layout: StoreLayout, *, wait_s: float = 10.0) -> None:
    """Create the store folders, schema files and the views, unless they are already current.

    The views are written once (and again only when the store is compacted or their
    definition changed), because writing needs the one read-write lock DuckDB allows per
    file: writers of results never open results.duckdb, so a person's SQL session never
    blocks a run. A copied or moved suite keeps its views: their paths are relative.
    """
    ensure_schema_files(layout)
    if views_current(layout):
        return
    with views_lock(layout):  # one process of this machine writes the views
        if views_current(layout):
            return
        connection = _open_for_writing(layout, wait_s)
        try:
            _write_views(layout, connection)
        finally:
            connection.close()


def _open_for_writing(layout: StoreLayout, wait_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            connection = duckdb.connect(str(layout.database), config=reading_config(layout))
            register(connection, layout.tables_dir)  # creating a view reads its files' schema
            return connection
        except (duckdb.IOException, duckdb.ConnectionException) as error:
            if time.monotonic() > deadline:
                raise StoreBusy(
                    f"cannot update the views of {layout.database}: {error}. Close other "
                    "connections to it (a DuckDB shell, a notebook) and run again."
                ) from None
            time.sleep(0.2)


def _write_views(layout: StoreLayout, connection: duckdb.DuckDBPyConnection) -> None:
    for statement in view_statements(layout):
        connection.execute(statement)
    layout.views_marker.write_text(_marker_text(layout))


@contextlib.contextmanager
def writing_views(layout: StoreLayout, *, wait_s: float) -> Iterator[Callable[[], None]]:
    """Hold the views' file lock and a read-write connection to results.duckdb (so no one
    reads it meanwhile), and give a function (re)writing the views of the current generation
    and their marker. Raises `StoreBusy` when results.duckdb stays held for `wait_s`."""
    with views_lock(layout):
        connection = _open_for_writing(layout, wait_s)
        try:
            yield lambda: _write_views(layout, connection)
        finally:
            connection.close()


def views_current(layout: StoreLayout) -> bool:
    """Whether results.duckdb's views match the store as it is (generation, version, tables)."""
    marker = layout.views_marker
    return (
        layout.database.exists() and marker.exists() and marker.read_text() == _marker_text(layout)
    )


def try_ensure_database(layout: StoreLayout, *, wait_s: float = 10.0) -> bool:
    """`ensure_database`, except that results.duckdb held open elsewhere is not an error.

    Writers never need results.duckdb, and readers can build the same views in memory, so a
    DuckDB shell left open on stale views (the store was compacted) must not stop an
    evaluation. Returns False, warning once per process, when the views could not be written;
    the next `_BUSY_RETRY_S` seconds do not wait for the lock again.
    """
    root = layout.root.resolve()
    if time.monotonic() < _busy_until.get(root, 0.0) and not views_current(layout):
        return False
    try:
        ensure_database(layout, wait_s=wait_s)
    except StoreBusy:
        if root not in _busy_until:
            log.warning(
                "warning: %s is held open by another process, so its views still describe "
                "an older state of the store; they are rewritten at the first command after "
                "it is closed (this command reads the store directly)",
                layout.database,
            )
        _busy_until[root] = time.monotonic() + _BUSY_RETRY_S
        return False
    return True


def _open_read_only(layout: StoreLayout, wait_s: float) -> duckdb.DuckDBPyConnection:
    # The views are rewritten (a few milliseconds under the read-write lock) when they go
    # stale or the store is compacted; a read-only open meanwhile fails, so wait it out.
    deadline = time.monotonic() + wait_s
    while True:
        try:
            connection = duckdb.connect(
                str(layout.database), read_only=True, config=reading_config(layout)
            )
            register(connection, layout.tables_dir)
            return connection
        except (duckdb.IOException, duckdb.ConnectionException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _open_in_memory(layout: StoreLayout) -> duckdb.DuckDBPyConnection:
    """The same views as results.duckdb's, in a connection of this process alone."""
    connection = duckdb.connect(":memory:", config=reading_config(layout))
    register(connection, layout.tables_dir)
    for statement in view_statements(layout):
        connection.execute(statement)
    return connection


@contextlib.contextmanager
def connect(layout: StoreLayout, *, wait_s: float = 10.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to results.duckdb (several may be open at once, in any process);
    its views built in memory instead while results.duckdb is held open with stale views."""
    if try_ensure_database(layout):
        connection = _open_read_only(layout, wait_s)
    else:
        connection = _open_in_memory(layout)
    try:
        yield connection
    finally:
        connection.close()


def query(layout: StoreLayout, sql: str, parameters: list | None = None) -> pd.DataFrame:
    """Run one SQL query on the results and return it as a DataFrame (a damaged file is set
    aside, and the query runs again over the rest)."""

    def run() -> pd.DataFrame:
        with connect(layout) as connection:
            return connection.execute(sql, parameters or []).df()

    return with_recovery(layout, run)


def fetch(
    layout: StoreLayout, sql: str, parameters: list | None = None
) -> tuple[list[str], list[tuple]]:
    """Run one SQL query on the results; column names and rows with DuckDB's own types."""

    def run() -> tuple[list[str], list[tuple]]:
        with connect(layout) as connection:
            cursor = connection.execute(sql, parameters or [])
            columns = [column[0] for column in cursor.description or []]
            return columns, cursor.fetchall()

    return with_recovery(layout, run)


# What `eval-pipeline sql` runs: one statement that reads (DESCRIBE, SHOW, SUMMARIZE and
# FROM-first queries parse as SELECT), never COPY, ATTACH, SET, PRAGMA or several at once.
_READING = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)


class NotReadOnly(ValueError):
    """A statement given to `fetch_read_only` could change or reach beyond the results."""


class QueryTooSlow(ValueError):
    """A `fetch_read_only` query ran past its time limit and was stopped."""


@dataclass(frozen=True)
class ReadLimits:
    """What one `fetch_read_only` query may use, as the agent's sandbox is bounded.

    Args:
        timeout_s: wall-clock seconds, fetching included; past it the query is interrupted.
        memory_limit: DuckDB's `memory_limit` (the machine's 80 % by default).
        max_temp_size: DuckDB's `max_temp_directory_size`, the spill to disk (90 % of the
            free disk by default).
    """

    timeout_s: float = 300.0
    memory_limit: str = "2GB"
    max_temp_size: str = "4GB"


def fetch_read_only(
    layout: StoreLayout, sql: str, limits: ReadLimits | None = None
) -> tuple[list[str], list[tuple]]:
    """Run one reading statement on the results, with no file access beyond the store.

    The connection is read-only, reads files only under the store's tables folder and its
    configuration is locked, so neither `COPY … TO`, `read_text('/etc/…')` nor `ATTACH` can
    reach a file; several statements, or one that is not a query, raise `NotReadOnly`. Time,
    memory and spill are bounded by `limits`.

    Raises:
        NotReadOnly: not one reading statement.
        QueryTooSlow: stopped at `limits.timeout_s`.
        KeyboardInterrupt: Ctrl-C while it ran (DuckDB reports it as an interrupted query).
    """
    limits = limits or ReadLimits()
    statements = duckdb.connect(":memory:").extract_statements(sql)
    if len(statements) != 1:
        raise NotReadOnly(f"give one SQL statement, not {len(statements)}")
    if statements[0].type not in _READING:
        raise NotReadOnly(
            f"only queries run here (SELECT, DESCRIBE, SUMMARIZE…), not {statements[0].type.name}"
        )

    def run() -> tuple[list[str], list[tuple]]:
        with connect(layout) as connection:
            connection.execute("SET allowed_directories = ?", [_store_directories(layout)])
            connection.execute("SET enable_external_access = false")
            connection.execute("SET memory_limit = ?", [limits.memory_limit])
            connection.execute("SET max_temp_directory_size = ?", [limits.max_temp_size])
            connection.execute("SET lock_configuration = true")
            timed_out = threading.Event()

            def stop() -> None:
                timed_out.set()
                connection.interrupt()

            timer = threading.Timer(limits.timeout_s, stop)
            timer.daemon = True
            timer.start()
            try:
                cursor = connection.execute(sql)
                columns = [column[0] for column in cursor.description or []]
                return columns, cursor.fetchall()
            except (duckdb.InterruptException, RuntimeError) as error:
                if timed_out.is_set():
                    raise QueryTooSlow(
                        f"the query was stopped after {limits.timeout_s:g} s (--timeout); "
                        "filter or aggregate more, or allow it longer"
                    ) from None
                if isinstance(error, duckdb.InterruptException) or "interrupted" in str(error):
                    raise KeyboardInterrupt from None  # Ctrl-C, which DuckDB turned into this
                raise
            finally:
                timer.cancel()

    return with_recovery(layout, run)


def _store_directories(layout: StoreLayout) -> list[str]:
    """The folders `fetch_read_only` may read: the tables folder, and each table's and the
    segments' folder as the views spell them (relative). DuckDB checks the path as written,
    and looks a relative path up in the working folder too when the store lacks it, so the
    relative ones name the table folders, not all of `store/`."""
    if layout.remote:
        return [layout.location + "/"]
    relative = [layout.table_dir(name) for name in TABLES] + [layout.segments_root]
    return [layout.tables_dir.resolve().as_posix() + "/"] + [
        Path(folder).relative_to(layout.root).as_posix() + "/" for folder in relative
    ]

"""SQL over the store as it is now: the views of the SQL surface over its Parquet files, in memory."""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._files import current_generation
from eval_pipeline.store._locks import reading_files
from eval_pipeline.store._objects import register
from eval_pipeline.store._state_folder import StateFolder
from eval_pipeline.store._tables import TABLES


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _path_sql(layout: StateFolder, path: Any) -> str:
    """A store path as a SQL string relative to the state folder (`layout.root`).

    DuckDB resolves a relative path in a view against the connection's `file_search_path`,
    else the working folder (measured, duckdb 2.0.1): every connection of the views sets
    `file_search_path` to the folder (`reading_config`)."""
    if layout.remote:
        # A bucket's objects are named by their URLs (`s3://…`), the same from anywhere.
        return _sql_string(path if isinstance(path, str) else path.as_posix())
    return _sql_string(Path(path).relative_to(layout.root).as_posix())


def reading_config(layout: StateFolder) -> dict[str, str]:
    """The DuckDB settings a connection needs to read the views (`duckdb.connect(config=…)`)."""
    return {"file_search_path": layout.root.resolve().as_posix()}


def _latest_files(layout: StateFolder, name: str) -> str:
    """SQL listing each partition's newest file, its current state. Files are named by the
    moment they were written, so the newest is the greatest name in its folder (the rule
    `latest_file` follows), and a partition whose newest write holds no row shows no row."""
    pattern = _path_sql(layout, layout.glob(name))
    schema_file = _sql_string(layout.empty_file(name).name)
    return (
        f"SELECT max(file) FROM glob({pattern}) WHERE parse_filename(file) <> {schema_file} "
        "GROUP BY parse_dirpath(file)"
    )


def relative_dir_sql(layout: StateFolder, name: str, column: str) -> str:
    """SQL for the partition key (`StateFolder.partition_key`) of the file in `column`.

    The glob spells a file from wherever the path was resolved (the search path, or the
    working folder), so the key is what follows the table's folder, matched from the end: a
    key never holds the table's folder name (model ids are quoted, `quote_part`)."""
    if layout.remote:
        prefix = _sql_string(layout.table_dir(name).as_posix())
        return f"substr(parse_dirpath({column}), length({prefix}) + 2)"
    table = Path(layout.table_dir(name)).relative_to(layout.root).as_posix()
    pattern = _sql_string(f"^(.*/)?{re.escape(table)}(/(.*))?$")
    return f"regexp_extract(parse_dirpath({column}), {pattern}, 3)"


def _compacted_statements(layout: StateFolder, name: str, cutoff: str) -> list[str]:
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


def view_statements(layout: StateFolder, cutoff: str | None = None) -> list[str]:
    """`<table>_history` (every file ever written) and `<table>` (each partition's latest file).

    An "append" table keeps every row in `<table>` too (each write is a new fact, such as a
    person's label), and `<table>_latest` holds the newest row per item (`latest_by`).
    Once the store is compacted (`compact_store`), the files written before the generation's
    cutoff are read from its two segments per table instead (`cutoff`: the current one).
    Paths are relative to the state folder: run them with `reading_config(layout)`.
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


def table_names() -> list[str]:
    """Every table and view of the SQL surface (`view_statements` creates them; results.duckdb
    holds a copy of each)."""
    names = []
    for name, spec in TABLES.items():
        names += [name, f"{name}_history"]
        if spec.latest_by:
            names.append(f"{name}_latest")
    return names


_CREATED = re.compile(r"CREATE OR REPLACE VIEW (\w+) AS")


def named_views(sql: str) -> set[str] | None:
    """The views a statement may read: those whose names it spells (a name in a string or a
    comment costs a view more, no error), and a view they read. None (every view) when it
    names none: `SHOW TABLES`, the catalog (`information_schema`)."""
    words = {word.lower() for word in re.findall(r"\w+", sql)}
    named = {name for name in table_names() if name in words}
    if not named:
        return None
    # An "append" table and its `_latest` are views over its `_history`.
    return named | {f"{name}_history" for name in TABLES if named & {name, f"{name}_latest"}}


def _open_in_memory(layout: StateFolder, views: set[str] | None) -> duckdb.DuckDBPyConnection:
    """A connection of this process alone with the store's views (all, or those named).

    Creating a view lists and reads the schema of its files (seconds over thousands of
    files), so a query creates only the views it reads."""
    connection = duckdb.connect(":memory:", config=reading_config(layout))
    try:
        register(connection, layout.tables_dir)
        for statement in view_statements(layout):
            created = _CREATED.match(statement)
            if views is None or (created is not None and created.group(1) in views):
                connection.execute(statement)
    except BaseException:
        connection.close()
        raise
    return connection


@contextlib.contextmanager
def connect(
    layout: StateFolder, *, views: set[str] | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection reading the store as it is now: the views of the SQL surface (`views`:
    only these) over its Parquet files, in memory. Any number may be open at once, in any
    process, while evaluations write; it holds the readers lock (`reading_files`), so
    compaction deletes no file it reads. (results.duckdb is for other clients: it is current
    as of the last publication, `publish_results`.)"""
    with reading_files(layout):
        # Creating a view reads its files' schemas: a damaged one is set aside there too.
        connection = with_recovery(layout, lambda: _open_in_memory(layout, views))
        try:
            yield connection
        finally:
            connection.close()


class _Shared:
    """The connection `query` and `fetch` share in a `one_connection` block, with the views
    created so far: each is created when a statement first names it (creating one reads its
    files' schemas, and most blocks read three or four of the tables), from the statements of
    the store as the block found it."""

    def __init__(self, layout: StateFolder, connection: duckdb.DuckDBPyConnection) -> None:
        self.layout, self.connection = layout, connection
        self._statements = view_statements(layout)
        self._created: set[str] = set()
        self._lock = threading.Lock()  # a block's tasks may run in threads of their own

    def with_views(self, views: set[str] | None) -> duckdb.DuckDBPyConnection:
        """A cursor of the connection once the `views` (None: all) exist."""
        with self._lock:
            for statement in self._statements:
                created = _CREATED.match(statement)
                name = created.group(1) if created else statement
                if name in self._created or (views is not None and name not in views):
                    continue
                self.connection.execute(statement)
                self._created.add(name)
            return self.connection.cursor()


#: The connection `query` and `fetch` share in this context (`one_connection`).
_SHARED: contextvars.ContextVar[_Shared | None] = contextvars.ContextVar(
    "eval_pipeline_store_connection", default=None
)


@contextlib.contextmanager
def one_connection(layout: StateFolder) -> Iterator[None]:
    """Within the block, `query` and `fetch` on `layout` share one connection, rather than
    each opening its own: DuckDB takes 15-20 ms to create the in-memory database of a
    connection and close it, more than most of a report's queries take. A view is created
    there when a statement first reads it. Each query still reads the store as it is when it
    runs (a view lists its files each time it is read) and runs on a cursor of its own; the
    readers lock is held throughout. Blocks nest (the outer connection serves); another
    thread opens its own connections."""
    if (shared := _SHARED.get()) is not None and shared.layout == layout:
        yield
        return
    with connect(layout, views=set()) as connection:
        token = _SHARED.set(_Shared(layout, connection))
        try:
            yield
        finally:
            _SHARED.reset(token)


@contextlib.contextmanager
def _reading(layout: StateFolder, sql: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for one statement: a cursor of the shared one (`one_connection`), or
    a connection of its own, each with the views `sql` names."""
    shared = _SHARED.get()
    if shared is None or shared.layout != layout:
        with connect(layout, views=named_views(sql)) as connection:
            yield connection
        return
    cursor = shared.with_views(named_views(sql))
    try:
        yield cursor
    finally:
        cursor.close()


def query(layout: StateFolder, sql: str, parameters: list | None = None) -> pd.DataFrame:
    """Run one SQL query on the results and return it as a DataFrame (a damaged file is set
    aside, and the query runs again over the rest)."""

    def run() -> pd.DataFrame:
        with _reading(layout, sql) as connection:
            return connection.execute(sql, parameters or []).df()

    return with_recovery(layout, run)


def batches(
    layout: StateFolder, sql: str, parameters: list | None = None, *, rows: int = 1000
) -> Iterator[list[dict[str, Any]]]:
    """Run one SQL query on the results and yield its rows as dicts, at most `rows` at a
    time, read from DuckDB as they are yielded: the memory of a large result is that of one
    batch. A damaged file is not recovered from here (a read cut halfway cannot be taken
    back): run the whole consumer under `with_recovery`."""
    with _reading(layout, sql) as connection:
        # A relation streams its batches; an executed statement's Arrow would copy them all.
        reader = connection.sql(sql, params=parameters or None).to_arrow_reader(rows)
        for batch in reader:
            if batch.num_rows:
                yield batch.to_pylist()


def fetch(
    layout: StateFolder, sql: str, parameters: list | None = None
) -> tuple[list[str], list[tuple]]:
    """Run one SQL query on the results; column names and rows with DuckDB's own types."""

    def run() -> tuple[list[str], list[tuple]]:
        with _reading(layout, sql) as connection:
            cursor = connection.execute(sql, parameters or [])
            columns = [column[0] for column in cursor.description or []]
            return columns, cursor.fetchall()

    return with_recovery(layout, run)

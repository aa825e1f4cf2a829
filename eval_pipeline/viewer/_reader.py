"""How the viewer reads the store: an in-memory DuckDB with the store's views, compact snapshots
of the small tables, and single partition files for the heavy columns."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from datetime import date

import duckdb

from eval_pipeline.store import (
    StateFolder,
    current_generation,
    ensure_schema_files,
    files_below,
    latest_sources,
    reading_config,
    reading_files,
    register_filesystem,
    view_statements,
)

# A run of the viewer is a graded attempt: (test, model, day, attempt), readable in a URL.
RUN_ID_SQL = (
    "substr(md5(concat_ws(chr(31), name, model, CAST(run_date AS VARCHAR), "
    "CAST(attempt AS VARCHAR))), 1, 16)"
)

# Rebuilt from the Parquet views when a table's files change. `grades_snapshot` leaves out the
# checks (data previews can be large): pages read them from the one partition file they need.
SNAPSHOTS = {
    "grades": [
        "CREATE OR REPLACE TABLE grades_snapshot AS SELECT name, model, run_date, attempt, "
        "run_key, status, passed, message, verified, tokens, cost_usd, duration_ms, "
        "tool_call_count, written_at, "
        "coalesce(list_contains(json_extract_string(checks, '$[*].kind'), 'evaluators'), false) "
        f"AS judged, {RUN_ID_SQL} AS run_id FROM grades"
    ],
    "test_cases": ["CREATE OR REPLACE TABLE cases_snapshot AS SELECT * FROM test_cases"],
    "labels": [
        f"CREATE OR REPLACE TABLE labels_snapshot AS SELECT *, {RUN_ID_SQL} AS run_id FROM labels",
        "CREATE OR REPLACE TABLE labels_latest_snapshot AS "
        f"SELECT *, {RUN_ID_SQL} AS run_id FROM labels_latest",
    ],
}


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class StoreReader:
    """The store as the viewer reads it: the Parquet files, as they are now (results.duckdb is
    only as current as its last publication). Files are
    immutable, so a table's snapshot is rebuilt only when its set of files changes: a run just
    graded or a label just given shows on the next page."""

    def __init__(self, layout: StateFolder) -> None:
        ensure_schema_files(layout)
        self.layout = layout
        self._database = duckdb.connect(":memory:", config=reading_config(layout))
        self._database.execute("SET parquet_metadata_cache = true")  # the files never change
        register_filesystem(self._database, layout.tables_dir)
        self._lock = threading.Lock()
        self._marks: dict[str, frozenset[str]] = {}
        self._generation: object = ()  # none yet: the views are written on first use

    def _files(self, table: str) -> frozenset[str]:
        return frozenset(p.as_posix() for p in files_below(self.layout.table_dir(table)))

    def _refresh(self) -> None:
        generation = current_generation(self.layout)
        if generation != self._generation:  # compacted: the views read other files now
            for statement in view_statements(self.layout, generation):
                self._database.execute(statement)
            self._generation = generation
            self._marks.clear()
        for table, statements in SNAPSHOTS.items():
            mark = self._files(table)
            if self._marks.get(table) != mark:
                for statement in statements:
                    self._database.execute(statement)
                self._marks[table] = mark

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of its own for one request (one per thread), on fresh snapshots.
        It holds the store's readers lock, so compaction deletes no file while it reads."""
        with reading_files(self.layout):
            with self._lock:
                self._refresh()
                cursor = self._database.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def partitions(self, table: str, keys: Iterable[tuple[str, date]]) -> str:
        """A FROM source over the latest file of each (model, day) partition of a table; with
        no file, an empty source of the table's columns. Partitions compacted since their last
        write are read from the current segment. Use within `cursor()` (the readers lock)."""
        files, segment, compacted = latest_sources(self.layout, table, sorted(set(keys)))
        sources = [f"(SELECT * FROM {table}_history WHERE false)"]
        if files:
            paths = ", ".join(_sql_string(f.as_posix()) for f in files)
            sources.append(
                f"(SELECT * FROM read_parquet([{paths}], union_by_name = true, "
                "hive_partitioning = false))"
            )
        if segment is not None:
            wanted = ", ".join(_sql_string(k) for k in compacted)
            sources.append(
                f"(SELECT * EXCLUDE (_partition) FROM read_parquet({_sql_string(segment.as_posix())}) "
                f"WHERE _partition IN ({wanted}))"
            )
        if len(sources) == 1:
            return sources[0]
        # The empty source stays: it gives a file written before a column was added (a run
        # stored before `answerer_details`) that column, as null.
        return "(" + " UNION ALL BY NAME ".join(sources) + ")"

    def close(self) -> None:
        self._database.close()

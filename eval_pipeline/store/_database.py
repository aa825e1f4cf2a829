"""`results.duckdb`: views over the Parquet store, openable read-only by anyone at any time."""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd

from eval_pipeline.store._files import ensure_schema_files
from eval_pipeline.store._layout import TABLES, StoreLayout

# Bump when a view's definition changes; the views are then recreated on next use.
VIEWS_VERSION = 3


class StoreBusy(RuntimeError):
    """results.duckdb is held open read-write elsewhere, so its views cannot be refreshed now."""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _latest_files(layout: StoreLayout, name: str) -> str:
    """SQL listing each partition's newest file, its current state. Files are named by the
    moment they were written, so the newest is the greatest name in its folder (the rule
    `latest_file` follows), and a partition whose newest write holds no row shows no row."""
    pattern = _sql_string(layout.glob(name))
    schema_file = _sql_string(layout.empty_file(name).name)
    return (
        f"SELECT max(file) FROM glob({pattern}) WHERE parse_filename(file) <> {schema_file} "
        "GROUP BY parse_dirpath(file)"
    )


def view_statements(layout: StoreLayout) -> list[str]:
    """`<table>_history` (every file ever written) and `<table>` (each partition's latest file).

    An "append" table keeps every row in `<table>` too (each write is a new fact, such as a
    person's label), and `<table>_latest` holds the newest row per item (`latest_by`).
    """
    statements = []
    for name, spec in TABLES.items():
        pattern = _sql_string(layout.glob(name))
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
        # Picking the latest files by name rather than the latest rows by a window over every
        # row reads no more than the query needs (twice as fast over a year of history).
        statements.append(
            f"CREATE OR REPLACE VIEW {name} AS SELECT * EXCLUDE (filename) FROM read_parquet("
            f"{pattern}, union_by_name = true, hive_partitioning = false, filename = true) "
            f"WHERE filename IN ({_latest_files(layout, name)})"
        )
    return statements


def _marker(layout: StoreLayout) -> Path:
    return layout.root / "results.views.json"


def _marker_text(layout: StoreLayout) -> str:
    return json.dumps({"version": VIEWS_VERSION, "store": str(layout.tables_dir.resolve())})


def ensure_database(layout: StoreLayout, *, wait_s: float = 10.0) -> None:
    """Create the store folders, schema files and the views, unless they are already current.

    The views are written once (and again only when the store moved or their definition
    changed), because writing needs the one read-write lock DuckDB allows per file: writers
    of results never open results.duckdb, so a person's SQL session never blocks a run.
    """
    ensure_schema_files(layout)
    marker = _marker(layout)
    if layout.database.exists() and marker.exists() and marker.read_text() == _marker_text(layout):
        return
    layout.root.mkdir(parents=True, exist_ok=True)
    with open(layout.root / ".results.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process of this machine writes the views
        if (
            layout.database.exists()
            and marker.exists()
            and marker.read_text() == _marker_text(layout)
        ):
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                connection = duckdb.connect(str(layout.database))
                break
            except duckdb.IOException as error:
                if time.monotonic() > deadline:
                    raise StoreBusy(
                        f"cannot update the views of {layout.database}: {error}. Close other "
                        "connections to it (a DuckDB shell, a notebook) and run again."
                    ) from None
                time.sleep(0.2)
        try:
            for statement in view_statements(layout):
                connection.execute(statement)
        finally:
            connection.close()
        marker.write_text(_marker_text(layout))


@contextlib.contextmanager
def connect(layout: StoreLayout) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to results.duckdb (several may be open at once, in any process)."""
    ensure_database(layout)
    connection = duckdb.connect(str(layout.database), read_only=True)
    try:
        yield connection
    finally:
        connection.close()


def query(layout: StoreLayout, sql: str, parameters: list | None = None) -> pd.DataFrame:
    """Run one SQL query on the results and return it as a DataFrame."""
    with connect(layout) as connection:
        return connection.execute(sql, parameters or []).df()


def fetch(
    layout: StoreLayout, sql: str, parameters: list | None = None
) -> tuple[list[str], list[tuple]]:
    """Run one SQL query on the results; column names and rows with DuckDB's own types."""
    with connect(layout) as connection:
        cursor = connection.execute(sql, parameters or [])
        columns = [column[0] for column in cursor.description or []]
        return columns, cursor.fetchall()

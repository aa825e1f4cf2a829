"""What `eval-pipeline sql` runs: one reading statement, with no file access beyond the store."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from eval_pipeline.store._damage import with_recovery
from eval_pipeline.store._database import connect, named_views
from eval_pipeline.store._layout import StoreLayout
from eval_pipeline.store._published import published_current
from eval_pipeline.store._tables import TABLES

# One statement that reads (DESCRIBE, SHOW, SUMMARIZE and FROM-first queries parse as
# SELECT), never COPY, ATTACH, SET, PRAGMA or several at once.
_READING = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)


class NotReadOnly(ValueError):
    """A statement given to `fetch_read_only` could change or reach beyond the results."""


def fetch_read_only(layout: StoreLayout, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one reading statement on the results, with no file access beyond the store.

    It reads results.duckdb (read-only) when that holds the store as it is now, the fastest
    (its tables need no file listed nor opened), else the views in memory (`connect`). The
    connection reads files only under the store's tables folder and its configuration is
    locked, so neither `COPY … TO`, `read_text('/etc/…')` nor `ATTACH` can reach a file;
    several statements, or one that is not a query, raise `NotReadOnly`.
    """
    statements = duckdb.connect(":memory:").extract_statements(sql)
    if len(statements) != 1:
        raise NotReadOnly(f"give one SQL statement, not {len(statements)}")
    if statements[0].type not in _READING:
        raise NotReadOnly(
            f"only queries run here (SELECT, DESCRIBE, SUMMARIZE…), not {statements[0].type.name}"
        )

    def run() -> tuple[list[str], list[tuple]]:
        with _reading(layout, sql) as connection:
            connection.execute("SET allowed_directories = ?", [_store_directories(layout)])
            connection.execute("SET enable_external_access = false")
            connection.execute("SET lock_configuration = true")
            cursor = connection.execute(sql)
            columns = [column[0] for column in cursor.description or []]
            return columns, cursor.fetchall()

    return with_recovery(layout, run)


def _reading(layout: StoreLayout, sql: str) -> contextlib.AbstractContextManager:
    # Opened and closed per statement: this process never holds two connections to the file,
    # so DuckDB's per-process cache of open databases never serves a replaced one.
    if published_current(layout):
        return contextlib.closing(duckdb.connect(str(layout.database), read_only=True))
    return connect(layout, views=named_views(sql))


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

"""Whether a reference's answer may change within a day, as the engine itself declares its functions."""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterable
from typing import Any

import duckdb

__all__ = ["any_may_vary_within_day", "may_vary_within_day"]

# SQL's value keywords, which DuckDB's parser reads as column names and its binder turns into
# calls of these functions.
_KEYWORD_FUNCTIONS = {
    "current_date": "current_date",
    "current_time": "get_current_time",
    "current_timestamp": "get_current_timestamp",
    "localtime": "current_localtime",
    "localtimestamp": "current_localtimestamp",
}
# Functions DuckDB declares consistent that read the clock: `age(TIMESTAMP)` measures from now
# with one argument, and DuckDB 2.0 declares the local time and timestamp consistent.
_CLOCK_DESPITE_CATALOG = frozenset({"age", "current_localtime", "current_localtimestamp"})
_TIME_ZONE_TYPES = ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ_NS")


_lock = threading.Lock()


@functools.cache
def _connection() -> duckdb.DuckDBPyConnection:
    """One in-memory connection for the parser and the catalogue (a new one costs ~40 ms)."""
    return duckdb.connect()


def _close_before_fork() -> None:
    # A forked process would get a copy of the database without the threads that serve it:
    # closed first, each process opens its own on its next classification.
    with _lock:
        if _connection.cache_info().currsize:
            _connection().close()
            _connection.cache_clear()


os.register_at_fork(before=_close_before_fork)


@functools.cache
def _varying_functions() -> tuple[frozenset[str], frozenset[str]]:
    """(every function DuckDB knows, those whose answer may differ between two queries).

    A function varies when one of its overloads is volatile (`random`, `uuid`, `nextval`), or
    consistent only within a query for another reason than a time-zone parameter (`now`,
    `current_date`, `current_setting`). An overload that is so because it takes a
    TIMESTAMP WITH TIME ZONE (`date_trunc`, `-` on such values) depends on the session's time
    zone, which every run of a day shares, not on the clock. Table functions carry no
    stability: they cannot be classified, so they count as varying.
    """
    with _lock:
        rows = (
            _connection()
            .execute("SELECT function_name, stability, parameter_types FROM duckdb_functions()")
            .fetchall()
        )
    known: set[str] = set()
    varying: set[str] = set(_CLOCK_DESPITE_CATALOG)
    for name, stability, parameters in rows:
        known.add(name)
        if stability == "CONSISTENT":
            continue
        zoned = any(str(t) in _TIME_ZONE_TYPES for t in parameters or ())
        if stability != "CONSISTENT_WITHIN_QUERY" or not zoned:
            varying.add(name)
    return frozenset(known), frozenset(varying)


def _called(node: Any, found: set[str]) -> set[str]:
    """The functions a serialized DuckDB parse tree calls (lowercase), keywords included."""
    if isinstance(node, dict):
        if "function_name" in node:
            found.add(str(node["function_name"]).lower())
        names = node.get("column_names")
        if node.get("class") == "COLUMN_REF" and isinstance(names, list) and len(names) == 1:
            keyword = _KEYWORD_FUNCTIONS.get(str(names[0]).lower())
            if keyword is not None:
                found.add(keyword)
        for value in node.values():
            _called(value, found)
    elif isinstance(node, list):
        for value in node:
            _called(value, found)
    return found


def may_vary_within_day(sql: str, *, dialect: str = "duckdb") -> bool:
    """Whether the query's answer may change from one run to the next on the same data and
    day: it calls a function DuckDB does not declare consistent (the clock, randomness, a
    session setting), one it does not know (a macro of the warehouse, an extension's), or the
    check cannot tell (a query that does not parse, another dialect). The question is put to
    DuckDB's own parser and catalogue, never to a list of names kept here; a false alarm
    costs only a rerun of the references. The verdict is kept per query text."""
    if dialect != "duckdb":
        return True
    verdict = _verdicts.get(sql)
    return verdict if verdict is not None else _classify([sql])[sql]


def any_may_vary_within_day(sqls: Iterable[str], *, dialect: str = "duckdb") -> bool:
    """Whether any of the queries may vary within a day (`may_vary_within_day`), the ones
    not judged yet put to DuckDB's parser in one statement (a suite's thousand references
    cost what a few dozen cost one at a time)."""
    queries = list(dict.fromkeys(sqls))
    if dialect != "duckdb":
        return bool(queries)
    known = {sql: _verdicts.get(sql) for sql in queries}
    missing = [sql for sql, verdict in known.items() if verdict is None]
    found = _classify(missing) if missing else {}
    return any(found[sql] if verdict is None else verdict for sql, verdict in known.items())


#: The verdict of each query text judged in this process (the catalogue does not change).
_verdicts: dict[str, bool] = {}
_MAX_VERDICTS = 100_000


def _classify(sqls: list[str]) -> dict[str, bool]:
    try:
        with _lock:
            rows = (
                _connection()
                .execute(
                    "SELECT query, json_serialize_sql(query) FROM unnest(?::VARCHAR[]) AS t(query)",
                    [sqls],
                )
                .fetchall()
            )
        serialized = dict(rows)
    except (duckdb.Error, ValueError):  # as before: any text the engine refuses
        if len(sqls) > 1:  # one query broke the statement: each on its own
            return {sql: _classify([sql])[sql] for sql in sqls}
        serialized = {}
    found = {sql: _varies(serialized.get(sql)) for sql in sqls}
    if len(_verdicts) + len(found) > _MAX_VERDICTS:
        _verdicts.clear()
    _verdicts.update(found)
    return found


def _varies(serialized: str | None) -> bool:
    try:
        tree = json.loads(serialized) if serialized else {"error": True}
    except ValueError:
        return True
    if not isinstance(tree, dict) or tree.get("error"):
        return True
    known, varying = _varying_functions()
    called = _called(tree.get("statements", []), set())
    return any(name in varying or name not in known for name in called)

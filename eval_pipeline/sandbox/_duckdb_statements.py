"""DuckDB's statement check for the sandbox: exactly one read-only statement, or advice on what to send instead."""

from __future__ import annotations

import re

import duckdb

from eval_pipeline.sandbox._sandbox_errors import (
    MAX_ENGINE_MESSAGE,
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
)
from eval_pipeline.suite import truncate

_ALLOWED = (
    "Each call runs exactly one read-only query: SELECT (also WITH ... SELECT, FROM ..., "
    "VALUES, PIVOT/UNPIVOT), DESCRIBE, SHOW, SUMMARIZE or EXPLAIN."
)
_WRITE = READ_ONLY_ADVICE
_ADVICE = {
    **dict.fromkeys(
        [
            "INSERT",
            "UPDATE",
            "DELETE",
            "MERGE_INTO",
            "CREATE",
            "CREATE_FUNC",
            "DROP",
            "ALTER",
            "VACUUM",
            "ANALYZE",
            "COPY_DATABASE",
        ],
        _WRITE,
    ),
    "ATTACH": "Only the tables already available can be queried (SHOW TABLES lists them).",
    "DETACH": "Only the tables already available can be queried (SHOW TABLES lists them).",
    "COPY": "Files cannot be written or read. Run the SELECT itself: its result comes back.",
    "EXPORT": "Files cannot be written. Run a SELECT: its result comes back.",
    "LOAD": "Extensions cannot be installed or loaded; use DuckDB's built-in functions.",
    "EXTENSION": "Extensions cannot be installed or loaded; use DuckDB's built-in functions.",
    "PRAGMA": "To inspect tables use SHOW TABLES, DESCRIBE <table> or "
    "SELECT * FROM pragma_table_info('<table>').",
    "SET": "Settings and variables cannot be changed (SET, RESET, USE): write "
    "schema-qualified names, and use WITH for intermediate values.",
    "VARIABLE_SET": "Variables cannot be set; use a CTE (WITH) for intermediate values.",
    "CALL": "Call table functions in a FROM clause instead: SELECT * FROM <function>(...).",
    "PREPARE": "Prepared statements are not available; write the values into the query.",
    "EXECUTE": "Prepared statements are not available; write the values into the query.",
    "TRANSACTION": "Transactions are not needed: send the SELECT on its own.",
}
# DuckDB parses any statement containing a PIVOT without an IN list as MULTI (it first
# creates an enum type), including CREATE TABLE ... AS PIVOT; accept it when it reads.
_READ_KEYWORDS = frozenset(
    {"SELECT", "WITH", "FROM", "VALUES", "TABLE", "PIVOT", "PIVOT_WIDER", "UNPIVOT"}
    | {"PIVOT_LONGER", "DESCRIBE", "SHOW", "SUMMARIZE"}
)
_KEYWORD = re.compile(r"[A-Za-z_]+")


def _words(sql: str) -> list[tuple[int, str]]:
    """(offset, upper-cased text) of each token DuckDB sees, comments left out.

    DuckDB's own tokenizer, so comments are skipped exactly as its parser skips them:
    block comments nest (``/* /* */ SELECT */ CREATE ...`` starts with CREATE), which a
    regular expression cannot follow. Measured: ~25 µs per query, against ~110 µs for
    sqlglot's tokenizer, which also gets nesting right but is a second parser to trust.
    """
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return []
    words = []
    for offset, kind in tokens:
        if kind == duckdb.token_type.comment:
            continue
        word = _KEYWORD.match(sql, offset)
        words.append((offset, word.group(0).upper() if word else sql[offset]))
    return words


def require_reading_statement(sql: str) -> duckdb.Statement:
    """The one read statement in `sql`, as parsed by DuckDB, or `ForbiddenStatement`.

    Parse errors become `QueryFailed` with DuckDB's message.
    """
    statements = _parse(sql)
    if not statements:
        raise ForbiddenStatement(f"The query is empty. {_ALLOWED}", sql=sql)
    if len(statements) > 1:
        kinds = ", ".join(_leading_keyword(s.query) or _kind(s) for s in statements)
        raise ForbiddenStatement(
            f"Send one SQL statement per call; this query has {len(statements)} ({kinds}). "
            f"Run them one at a time, or combine them with WITH. {_ALLOWED}",
            sql=sql,
        )
    statement = statements[0]
    _require_read(statement, sql, explained=False)
    return statement


def _parse(sql: str) -> list[duckdb.Statement]:
    try:
        return duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryFailed(
            truncate(str(error).strip(), MAX_ENGINE_MESSAGE),
            sql=sql,
            error_type=type(error).__name__,
        ) from None


def _kind(statement: duckdb.Statement) -> str:
    try:
        return statement.type.name
    except ValueError:
        # A statement type the Python client has no enum member for (UPDATE EXTENSIONS).
        return "UNKNOWN"


def _require_read(statement: duckdb.Statement, sql: str, *, explained: bool) -> None:
    kind = _kind(statement)
    word = _leading_keyword(statement.query) or kind
    if kind == "SELECT":
        return
    if kind == "MULTI":
        if word in _READ_KEYWORDS:
            return
        kind = "CREATE"  # a write wrapped around a PIVOT
    if kind == "EXPLAIN" and not explained:
        inner = _parse(_after_explain(statement.query))
        if len(inner) == 1:
            _require_read(inner[0], sql, explained=True)
            return
        raise ForbiddenStatement(f"EXPLAIN must be followed by one SELECT. {_ALLOWED}", sql=sql)
    parts = [f"{word} is not allowed here.", _ADVICE.get(kind, ""), _ALLOWED]
    raise ForbiddenStatement(" ".join(part for part in parts if part), sql=sql)


def _leading_keyword(sql: str) -> str:
    """The statement's first keyword, past comments and opening parentheses."""
    return next((word for _, word in _words(sql) if word != "("), "")


def _after_explain(sql: str) -> str:
    """The statement that `EXPLAIN [ANALYZE] [(options)]` applies to."""
    words = _words(sql)
    i = 1 if words and words[0][1] == "EXPLAIN" else 0
    if i < len(words) and words[i][1] in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(words) and words[i][1] == "(":
        depth = 0
        while i < len(words):
            depth += {"(": 1, ")": -1}.get(words[i][1], 0)
            i += 1
            if depth == 0:
                break
    return sql[words[i][0] :] if 0 < i < len(words) else ""

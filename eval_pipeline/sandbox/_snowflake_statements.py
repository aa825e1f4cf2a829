"""Snowflake's statement check for the sandbox: read as Snowflake reads it, then one read with built-in functions only.

Snowflake's parser is not on PyPI, so the check first reads quotes and comments by
Snowflake's lexing rules (`server_text`): comments (`--`, `//`, `/* */`) are dropped and the
server is sent the text without them, so no comment can mean one thing here and another
there; a stage (`@name`, the files of an internal or external stage) is refused wherever it
appears outside a string, and so is any character on which two readers could disagree
(control characters, non-ASCII spaces and symbols). What remains is parsed with sqlglot in
the Snowflake dialect and must be one read: a query (WITH, UNION, VALUES), SHOW or DESCRIBE,
with no DML, DDL, COPY, PUT/GET, CALL, EXECUTE IMMEDIATE or scripting block, no table read
from a URL or a stage, no sequence advanced, and no function but the built-ins sqlglot
models or `SNOWFLAKE_FUNCTIONS` lists: user functions, external functions (which send rows
to a URL) and `SYSTEM$` functions that act (`SYSTEM$CANCEL_QUERY`, `SYSTEM$WAIT`) are not.
"""

from __future__ import annotations

import unicodedata

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from eval_pipeline.sandbox._sandbox_errors import (
    NO_FILES_ADVICE,
    NO_INTO,
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
    require_one_statement,
)

__all__ = ["ALLOWED_SNOWFLAKE", "SNOWFLAKE_FUNCTIONS", "require_snowflake_reading_statement"]

ALLOWED_SNOWFLAKE = (
    "Each call runs exactly one read-only query: SELECT (also WITH ... SELECT), VALUES, SHOW "
    "or DESCRIBE."
)
_STAGES = (
    "Stages (@name), files and URLs are not allowed: only the database's tables and views can "
    "be read."
)
#: Snowflake built-ins that read data and nothing else, which sqlglot does not model
#: (functions it models, such as DATEADD or IFF, are allowed as they are).
SNOWFLAKE_FUNCTIONS = frozenset(
    [
        "AS_ARRAY",
        "AS_BINARY",
        "AS_BOOLEAN",
        "AS_CHAR",
        "AS_DATE",
        "AS_DECIMAL",
        "AS_DOUBLE",
        "AS_INTEGER",
        "AS_NUMBER",
        "AS_OBJECT",
        "AS_REAL",
        "AS_TIME",
        "AS_TIMESTAMP_LTZ",
        "AS_TIMESTAMP_NTZ",
        "AS_TIMESTAMP_TZ",
        "AS_VARCHAR",
        "HASH",
        "HAVERSINE",
        "IS_ARRAY",
        "IS_BINARY",
        "IS_BOOLEAN",
        "IS_CHAR",
        "IS_DATE",
        "IS_DECIMAL",
        "IS_DOUBLE",
        "IS_INTEGER",
        "IS_OBJECT",
        "IS_REAL",
        "IS_TIME",
        "IS_TIMESTAMP_LTZ",
        "IS_TIMESTAMP_NTZ",
        "IS_TIMESTAMP_TZ",
        "IS_VARCHAR",
        "OBJECT_DELETE",
        "OBJECT_PICK",
        "RATIO_TO_REPORT",
        "REGEXP",
        "SYSTEM$TYPEOF",
        "TO_DATE",
        "TO_OBJECT",
        "TO_TIME",
        "TRY_TO_DATE",
        "TRY_TO_TIME",
        "TRY_TO_TIMESTAMP",
        "TRY_TO_TIMESTAMP_LTZ",
        "TRY_TO_TIMESTAMP_NTZ",
        "TRY_TO_TIMESTAMP_TZ",
    ]
)
_READS = (exp.Query, exp.Values, exp.Describe, exp.Show)
_WRITES = (exp.DML, exp.Create, exp.Drop, exp.Alter, exp.Copy, exp.Command, exp.Set, exp.Use)
#: Words of statements that move files or run code, refused wherever they stand (sqlglot
#: reads some of them as an opaque command, or not at all).
_ACTION_WORDS = frozenset({"PUT", "GET", "CALL", "EXECUTE", "DECLARE", "BEGIN", "LET", "REMOVE"})


def require_snowflake_reading_statement(sql: str) -> str:
    """The text to send Snowflake for `sql` (its comments dropped), once it reads as one
    read statement calling only built-in functions.

    Raises:
        QueryFailed: the text could not be read (an unterminated string, a syntax error).
        ForbiddenStatement: not one read, or it reaches for stages, URLs, procedures,
            scripts, sequences or functions that are not Snowflake's own reading ones.
    """
    text = server_text(sql)
    try:
        tokens = sqlglot.tokenize(text, read="snowflake")
    except TokenError as error:
        raise QueryFailed(f"The query could not be read: {error}", sql=sql) from None
    first = tokens[0].text.upper() if tokens else ""
    if first in _ACTION_WORDS:
        raise ForbiddenStatement(
            f"{first} is not allowed here: no procedures, scripts or file transfers. "
            f"{_WRITE} {ALLOWED_SNOWFLAKE}",
            sql=sql,
        )
    try:
        statements = [s for s in sqlglot.parse(text, read="snowflake") if s is not None]
    except ParseError as error:
        description = error.errors[0]["description"] if error.errors else str(error)
        raise QueryFailed(
            f"The query could not be parsed as Snowflake SQL ({description}). Check the "
            f"syntax, or write it more simply. {ALLOWED_SNOWFLAKE}",
            sql=sql,
        ) from None
    require_one_statement(len(statements), sql, ALLOWED_SNOWFLAKE)
    statement = statements[0]
    if not isinstance(statement, _READS):
        advice = _FILES if isinstance(statement, exp.Copy | exp.Put) else _WRITE
        raise ForbiddenStatement(
            f"{first or 'This statement'} is not allowed here. {advice} {ALLOWED_SNOWFLAKE}",
            sql=sql,
        )
    _require_read_only(statement, sql)
    return text


_WRITE = READ_ONLY_ADVICE
_FILES = NO_FILES_ADVICE


def _require_read_only(statement: exp.Expression, sql: str) -> None:
    for node in statement.walk():
        if isinstance(node, _WRITES):
            raise ForbiddenStatement(
                f"{node.key.upper()} inside a query is not allowed. {_WRITE}", sql=sql
            )
        if isinstance(node, exp.Into):
            raise ForbiddenStatement(NO_INTO, sql=sql)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Literal):
            raise ForbiddenStatement(f"{_STAGES} {ALLOWED_SNOWFLAKE}", sql=sql)
        if isinstance(node, exp.Column) and node.name.upper() == "NEXTVAL":
            raise ForbiddenStatement(
                f"Sequences cannot be advanced here (NEXTVAL). {_WRITE}", sql=sql
            )
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
            raise ForbiddenStatement(_function_refusal(node.expression.sql("snowflake")), sql=sql)
        if isinstance(node, exp.Anonymous) and node.name.upper() not in SNOWFLAKE_FUNCTIONS:
            raise ForbiddenStatement(_function_refusal(node.name), sql=sql)


def _function_refusal(name: str) -> str:
    return (
        f"The function {name} is not allowed: only Snowflake's built-in functions for reading "
        "data can be called (no user or external functions, no SYSTEM$ functions that act, "
        "no stored procedures). Use the tables and ordinary functions instead."
    )


def server_text(sql: str) -> str:
    """`sql` as Snowflake's lexer reads it, each comment replaced by one space.

    Snowflake's rules: `'...'` is a string (a backslash escapes the next character, a doubled
    quote is one), `$$...$$` a string with no escapes (unless the `$$` continues a name), `"..."` an identifier (a doubled quote
    is one); `--` and `//` run to the end of the line, `/* ... */` ends at the first `*/`
    (a `/*` inside one is refused: readers disagree on nesting).

    Raises:
        ForbiddenStatement: a stage (`@`), a nested comment, or a character readers could
            disagree on outside a string.
        QueryFailed: a string, identifier or comment that never ends.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            end = _closing(sql, i)
            out.append(sql[i:end])
            i = end
        elif sql.startswith("$$", i) and not (i and _in_name(sql[i - 1])):
            end = sql.find("$$", i + 2)
            if end < 0:
                raise QueryFailed("The query has a $$ string that is never closed.", sql=sql)
            out.append(sql[i : end + 2])
            i = end + 2
        elif sql.startswith(("--", "//"), i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            _require_plain(sql, sql[i:end])
            out.append(" ")
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise QueryFailed("The query has a /* comment that never ends.", sql=sql)
            if "/*" in sql[i + 2 : end]:
                raise ForbiddenStatement(
                    "Nested /* comments */ are not allowed; remove the comments.", sql=sql
                )
            _require_plain(sql, sql[i : end + 2])
            out.append(" ")
            i = end + 2
        elif c == "@":
            raise ForbiddenStatement(f"{_STAGES} {ALLOWED_SNOWFLAKE}", sql=sql)
        else:
            _require_plain(sql, c)
            out.append(c)
            i += 1
    return "".join(out)


def _in_name(c: str) -> bool:
    """Whether `c` continues an unquoted name: `a$$b` is one name to Snowflake, no string."""
    return c.isalnum() or c in "_$"


def _closing(sql: str, start: int) -> int:
    """The index just past the quote closing the string or identifier opened at `start`."""
    quote = sql[start]
    i = start + 1
    while i < len(sql):
        c = sql[i]
        if c == "\\" and quote == "'":
            i += 2
            continue
        if c == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:
                i += 2  # a doubled quote stands for one
                continue
            return i + 1
        i += 1
    raise QueryFailed(f"The query has a {quote} that is never closed.", sql=sql)


def _require_plain(sql: str, text: str) -> None:
    """Refuse characters outside strings on which Snowflake and a parser could disagree:
    control characters but tab and line ends, and non-ASCII characters that are not letters,
    digits or accents."""
    for c in text:
        if c.isascii():
            if ord(c) >= 32 or c in "\t\n\r":
                continue
        elif unicodedata.category(c)[0] in "LNM":
            continue
        raise ForbiddenStatement(
            f"The character U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')}) is only allowed "
            "inside a quoted string: Snowflake and the sandbox could read the query "
            "differently. Use plain spaces and ASCII punctuation.",
            sql=sql,
        )

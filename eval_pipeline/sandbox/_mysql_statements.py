"""MySQL/MariaDB's statement check for the sandbox: read as the server reads it, then one read with allowed functions only.

There is no MySQL parser on PyPI that is the server's own, so the check first reads quotes
and comments exactly as the server's lexer does (`server_text`): comments are dropped (the
server is sent the text without them, so no comment can mean one thing here and another
there), MySQL's executable comments are refused, and so is any character on which two
readers could disagree (control characters, non-ASCII spaces and symbols) outside string
literals and quoted identifiers. What remains is parsed with sqlglot in the MySQL dialect and
must be one read (no writes, no SELECT INTO, no locks) whose functions are all known:
standard functions sqlglot models, or the MySQL built-ins of `MYSQL_FUNCTIONS`.
"""

from __future__ import annotations

import unicodedata

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from eval_pipeline.sandbox._sandbox_errors import (
    NO_FILES_ADVICE,
    NO_INTO,
    NO_LOCKS,
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
    require_one_statement,
)

__all__ = ["ALLOWED_MYSQL", "MYSQL_FUNCTIONS", "require_mysql_reading_statement", "server_text"]

ALLOWED_MYSQL = (
    "Each call runs exactly one read-only query: SELECT (also WITH ... SELECT), VALUES, SHOW, "
    "DESCRIBE or EXPLAIN of a SELECT."
)
_WRITE = READ_ONLY_ADVICE
_FILES = NO_FILES_ADVICE
#: MySQL/MariaDB built-ins that read data and nothing else, which sqlglot does not model
#: (functions it models, such as COUNT or DATE_FORMAT, are allowed as they are).
MYSQL_FUNCTIONS = frozenset(
    [
        "ADDDATE",
        "ADDTIME",
        "BIN",
        "CHARSET",
        "COERCIBILITY",
        "COLLATION",
        "CONV",
        "CRC32",
        "DAYNAME",
        "ELT",
        "EXPORT_SET",
        "FIELD",
        "FIND_IN_SET",
        "FROM_DAYS",
        "INET_ATON",
        "INET_NTOA",
        "INET6_ATON",
        "INET6_NTOA",
        "JSON_ARRAY",
        "JSON_ARRAYAGG",
        "JSON_CONTAINS",
        "JSON_CONTAINS_PATH",
        "JSON_DEPTH",
        "JSON_LENGTH",
        "JSON_QUOTE",
        "JSON_SEARCH",
        "JSON_UNQUOTE",
        "JSON_VALID",
        "JSON_MERGE_PATCH",
        "JSON_MERGE_PRESERVE",
        "JSON_OVERLAPS",
        "JSON_PRETTY",
        "JSON_COMPACT",
        "JSON_DETAILED",
        "JSON_LOOSE",
        "JSON_TABLE",
        "MAKEDATE",
        "MAKETIME",
        "MICROSECOND",
        "MID",
        "NOW",
        "OCT",
        "OCTET_LENGTH",
        "ORD",
        "PERIOD_ADD",
        "PERIOD_DIFF",
        "QUOTE",
        "SEC_TO_TIME",
        "STRCMP",
        "SUBDATE",
        "SUBTIME",
        "SYSDATE",
        "TIME_FORMAT",
        "TIME_TO_SEC",
        "TIMEDIFF",
        "TO_SECONDS",
        "UNIX_TIMESTAMP",
        "WEEKDAY",
        "YEARWEEK",
        "USER",
        "CURRENT_ROLE",
        "SOUNDEX",
        "FORMAT_BYTES",
        "SFORMAT",
        "NATURAL_SORT_KEY",
        "REGEXP_INSTR",
        "REGEXP_SUBSTR",
        "LCASE",
        "UCASE",
        "DECODE_HISTOGRAM",
        "CHR",
    ]
)
_READS = (exp.Query, exp.Values, exp.Describe, exp.Show)
_WRITES = (exp.DML, exp.Create, exp.Drop, exp.Alter, exp.Copy, exp.Command, exp.Set)
#: Words that read or write server files (sqlglot cannot parse INTO OUTFILE at all).
_FILE_WORDS = frozenset({"OUTFILE", "DUMPFILE", "INFILE", "LOAD_FILE"})


def require_mysql_reading_statement(sql: str) -> str:
    """The text to send the server for `sql` (its comments dropped), once it reads as one
    read statement calling only allowed functions.

    Raises:
        QueryFailed: the text could not be read (an unterminated string, a syntax error).
        ForbiddenStatement: not one read, or it reaches for files, locks or unknown functions.
    """
    text = server_text(sql)
    try:
        tokens = sqlglot.tokenize(text, read="mysql")
    except TokenError as error:
        raise QueryFailed(f"The query could not be read: {error}", sql=sql) from None
    words = {t.text.upper() for t in tokens if t.token_type.name not in ("STRING", "IDENTIFIER")}
    if words & _FILE_WORDS:
        raise ForbiddenStatement(f"{_FILES} {ALLOWED_MYSQL}", sql=sql)
    try:
        statements = [s for s in sqlglot.parse(text, read="mysql") if s is not None]
    except ParseError as error:
        first = error.errors[0]["description"] if error.errors else str(error)
        raise QueryFailed(
            f"The query could not be parsed as MySQL SQL ({first}). Check the syntax, "
            f"or write it more simply. {ALLOWED_MYSQL}",
            sql=sql,
        ) from None
    require_one_statement(len(statements), sql, ALLOWED_MYSQL)
    statement = statements[0]
    if not isinstance(statement, _READS):
        word = tokens[0].text.upper() if tokens else type(statement).__name__.upper()
        advice = _FILES if isinstance(statement, exp.Copy) else _WRITE
        raise ForbiddenStatement(f"{word} is not allowed here. {advice} {ALLOWED_MYSQL}", sql=sql)
    _require_read_only(statement, sql)
    return text


def _require_read_only(statement: exp.Expression, sql: str) -> None:
    for node in statement.walk():
        if isinstance(node, _WRITES):
            raise ForbiddenStatement(
                f"{node.key.upper()} inside a query is not allowed. {_WRITE}", sql=sql
            )
        if isinstance(node, exp.Into):
            raise ForbiddenStatement(NO_INTO, sql=sql)
        if isinstance(node, exp.Lock):
            raise ForbiddenStatement(NO_LOCKS, sql=sql)
        if isinstance(node, exp.Anonymous) and node.name.upper() not in MYSQL_FUNCTIONS:
            raise ForbiddenStatement(
                f"The function {node.name} is not allowed: only MySQL's built-in functions "
                "for reading data can be called (no files, locks, sleeps, session state or "
                "stored functions). Use the tables and ordinary functions instead.",
                sql=sql,
            )


def server_text(sql: str) -> str:
    """`sql` as MySQL's lexer reads it, each comment replaced by one space.

    The server's rules: `'...'` and `"..."` are strings (backslash escapes, a doubled quote
    is one), `` `...` `` an identifier, as they are in every session `warehouses` opens: it
    sets the whole sql_mode and refuses a session whose mode reads otherwise (ANSI_QUOTES,
    NO_BACKSLASH_ESCAPES, or a combination such as ANSI that brings them); `#` and `-- ` (two dashes then a space or control character) run to the end
    of the line, `/* ... */` does not nest, and `/*! ... */` is run by the server.

    Raises:
        ForbiddenStatement: an executable comment, or a character readers could disagree on.
        QueryFailed: a string, identifier or comment that never ends.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            end = _closing(sql, i)
            out.append(sql[i:end])
            i = end
        elif c == "#" or (c == "-" and sql.startswith("--", i) and _ends_dash_dash(sql, i + 2)):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            _require_plain(sql, sql[i:end])
            out.append(" ")
            i = end
        elif sql.startswith("/*", i):
            if sql.startswith(("/*!", "/*M!"), i):
                raise ForbiddenStatement(
                    "Comments of the form /*! ... */ are not allowed: MySQL and MariaDB run "
                    f"their content as SQL. Write the query without them. {ALLOWED_MYSQL}",
                    sql=sql,
                )
            end = sql.find("*/", i + 2)
            if end < 0:
                raise QueryFailed("The query has a /* comment that never ends.", sql=sql)
            _require_plain(sql, sql[i : end + 2])
            out.append(" ")
            i = end + 2
        else:
            _require_plain(sql, c)
            out.append(c)
            i += 1
    return "".join(out)


def _ends_dash_dash(sql: str, after: int) -> bool:
    """Whether `--` ending before `after` starts a comment for MySQL: the end of the text
    or an ASCII space or control character follows."""
    return after >= len(sql) or sql[after] in " \t\n\r\x0b\x0c" or ord(sql[after]) < 32


def _closing(sql: str, start: int) -> int:
    """The index just past the quote closing the string or identifier opened at `start`."""
    quote = sql[start]
    i = start + 1
    while i < len(sql):
        c = sql[i]
        if c == "\\" and quote != "`":
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
    """Refuse characters outside strings on which the server and a parser could disagree:
    control characters but tab and line ends, and non-ASCII characters that are not letters,
    digits or accents (U+00A0 and U+3000 are spaces to one reader, part of a name to another)."""
    for c in text:
        if c.isascii():
            if ord(c) >= 32 or c in "\t\n\r":
                continue
        elif unicodedata.category(c)[0] in "LNM":
            continue
        raise ForbiddenStatement(
            f"The character U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')}) is only allowed "
            "inside a quoted string: MySQL and the sandbox could read the query differently. "
            "Use plain spaces and ASCII punctuation.",
            sql=sql,
        )

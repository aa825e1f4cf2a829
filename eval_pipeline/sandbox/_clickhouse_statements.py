"""ClickHouse's statement check for the sandbox: read as the server reads it, then one read reaching nothing outside the database.

The server's `readonly` setting is the first defence (`warehouses`): no writes, no DDL, and
under `readonly = 1` no table functions. The check first reads quotes and comments as
ClickHouse's lexer does (`server_text`): comments are dropped (the server is sent the text
without them), and `#`, `$` (heredoc strings) and any character two readers could disagree
on are refused outside strings and quoted names. What remains is parsed with sqlglot in the
ClickHouse dialect and must be one read: a SELECT (WITH, UNION) or DESCRIBE, with no
`SETTINGS` (which could lift the time limit or the user's limits), no `FORMAT`, no
`INTO OUTFILE`, no table function but those that make numbers (`TABLE_FUNCTIONS`: `url()`,
`s3()`, `file()`, `remote()`, `mysql()`, `executable()`, `input()`... reach outside), and
no function of `FORBIDDEN_FUNCTIONS` (files, sleeps, the server's own code and log).
"""

from __future__ import annotations

import unicodedata

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from eval_pipeline.sandbox._sandbox_errors import (
    NO_FILES_ADVICE,
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
    require_one_statement,
)

__all__ = [
    "ALLOWED_CLICKHOUSE",
    "FORBIDDEN_FUNCTIONS",
    "TABLE_FUNCTIONS",
    "require_clickhouse_reading_statement",
    "server_text",
]

ALLOWED_CLICKHOUSE = (
    "Each call runs exactly one read-only ClickHouse query: SELECT (also WITH ... SELECT, "
    "UNION ALL) or DESCRIBE TABLE, without SETTINGS, FORMAT or INTO OUTFILE."
)
#: Table functions a query may read from (in FROM, JOIN or `x IN f(...)`): they make rows
#: from their arguments alone. Every other one (url, s3, file, remote, cluster, mysql,
#: postgresql, hdfs, jdbc, odbc, executable, input, and any a later server adds) is refused.
TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "zeros", "zeros_mt", "generate_series", "generateseries", "values"}
)
#: Functions (lower case) that reach outside the query: read the server's files or its
#: models, connect to another server, write the server's log, sleep, or read its code.
FORBIDDEN_FUNCTIONS = frozenset(
    {
        "file",
        "sleep",
        "sleepeachrow",
        "catboostevaluate",
        "modelevaluate",
        "hascolumnintable",
        "logtrace",
        "addresstoline",
        "addresstolinewithinlines",
        "addresstosymbol",
        "demangle",
        "trap",
    }
)
_READS = (exp.Query, exp.Describe)
#: The words a read may start with.
_FIRST_WORDS = frozenset({"SELECT", "WITH", "DESCRIBE", "DESC", "("})
_WRITES = (exp.DML, exp.Create, exp.Drop, exp.Alter, exp.Copy, exp.Command, exp.Set)
#: Words refused wherever they stand outside strings and names: they change the server's
#: limits, write files, or leave the SELECT grammar sqlglot reads.
_WORDS = {
    "SETTINGS": "SETTINGS is not allowed: the session's limits hold for every query.",
    "OUTFILE": f"INTO OUTFILE is not allowed. {NO_FILES_ADVICE}",
}


def require_clickhouse_reading_statement(sql: str) -> str:
    """The text to send the server for `sql` (its comments dropped), once it reads as one
    read statement reaching nothing outside the database.

    Raises:
        QueryFailed: the text could not be read (an unterminated string, a syntax error).
        ForbiddenStatement: not one read, or it reaches for files, URLs, other servers,
            programs or the session's settings.
    """
    text = server_text(sql)
    try:
        tokens = sqlglot.tokenize(text, read="clickhouse")
    except TokenError as error:
        raise QueryFailed(f"The query could not be read: {error}", sql=sql) from None
    first = tokens[0].text.upper() if tokens else ""
    if tokens and first not in _FIRST_WORDS:
        # Refused before sqlglot reads it: its ClickHouse grammar stops at some of them
        # (KILL, SYSTEM) with a syntax error, which is no answer for the model.
        raise ForbiddenStatement(
            f"{first} is not allowed here. {READ_ONLY_ADVICE} {ALLOWED_CLICKHOUSE}", sql=sql
        )
    for token in tokens:
        advice = _WORDS.get(token.text.upper())
        if advice and token.token_type.name not in ("STRING", "IDENTIFIER"):
            raise ForbiddenStatement(f"{advice} {ALLOWED_CLICKHOUSE}", sql=sql)
    try:
        statements = [s for s in sqlglot.parse(text, read="clickhouse") if s is not None]
    except ParseError as error:
        first = error.errors[0]["description"] if error.errors else str(error)
        raise QueryFailed(
            f"The query could not be parsed as ClickHouse SQL ({first}). Check the syntax, "
            f"or write it more simply. {ALLOWED_CLICKHOUSE}",
            sql=sql,
        ) from None
    require_one_statement(len(statements), sql, ALLOWED_CLICKHOUSE)
    statement = statements[0]
    if not isinstance(statement, _READS):
        word = tokens[0].text.upper() if tokens else type(statement).__name__.upper()
        raise ForbiddenStatement(
            f"{word} is not allowed here. {READ_ONLY_ADVICE} {ALLOWED_CLICKHOUSE}", sql=sql
        )
    _require_read_only(statement, sql)
    return text


def _require_read_only(statement: exp.Expression, sql: str) -> None:
    for node in statement.walk():
        if isinstance(node, _WRITES):
            raise ForbiddenStatement(
                f"{node.key.upper()} inside a query is not allowed. {READ_ONLY_ADVICE}", sql=sql
            )
        if isinstance(node, exp.Into):
            raise ForbiddenStatement(f"INTO is not allowed. {READ_ONLY_ADVICE}", sql=sql)
        if node.args.get("settings"):
            raise ForbiddenStatement(f"{_WORDS['SETTINGS']} {ALLOWED_CLICKHOUSE}", sql=sql)
        if node.args.get("format"):
            raise ForbiddenStatement(
                f"FORMAT is not allowed: the result comes back as rows. {ALLOWED_CLICKHOUSE}",
                sql=sql,
            )
        # A table function is read where a table goes: FROM, JOIN, and `x IN f(...)`.
        source = node.this if isinstance(node, exp.Table) else None
        source = node.args.get("field") if isinstance(node, exp.In) else source
        if isinstance(source, exp.Func):
            name = _function_name(source)
            if name.lower() not in TABLE_FUNCTIONS:
                raise ForbiddenStatement(
                    f"The table function {name}() is not allowed: it reads from outside the "
                    f"database (files, URLs, other servers, programs). {NO_FILES_ADVICE}",
                    sql=sql,
                )
        if isinstance(node, exp.Func) and _function_name(node).lower() in FORBIDDEN_FUNCTIONS:
            raise ForbiddenStatement(
                f"The function {_function_name(node)} is not allowed: it reaches outside the "
                f"query (files, other servers, the server's code or log) or sleeps. "
                f"{NO_FILES_ADVICE}",
                sql=sql,
            )


def _function_name(node: exp.Func) -> str:
    """The function as the query spells it (ClickHouse's names are matched lower case)."""
    return node.name if isinstance(node, exp.Anonymous) else node.sql_name()


def server_text(sql: str) -> str:
    """`sql` as ClickHouse's lexer reads it, each comment replaced by one space.

    The server's rules: `'...'` is a string, `"..."` and `` `...` `` are names (a backslash
    escapes the next character, a doubled quote is one); `--` runs to the end of the line and
    `/* ... */` does not nest.

    Raises:
        ForbiddenStatement: `#` or `$` outside strings (a comment or a heredoc string to
            newer servers, an error to older ones), a comment holding `/*`, or a character
            readers could disagree on.
        QueryFailed: a string, name or comment that never ends.
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            end = _closing(sql, i)
            out.append(sql[i:end])
            i = end
        elif sql.startswith("--", i):
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
                    "Nested /* comments are not allowed: servers read them differently. "
                    f"Write the query without them. {ALLOWED_CLICKHOUSE}",
                    sql=sql,
                )
            _require_plain(sql, sql[i : end + 2])
            out.append(" ")
            i = end + 2
        elif c in "#$":
            raise ForbiddenStatement(
                f"The character {c} is only allowed inside a quoted string: ClickHouse "
                "versions read it differently (a comment, a heredoc string). Use -- for "
                f"comments and '...' for strings. {ALLOWED_CLICKHOUSE}",
                sql=sql,
            )
        else:
            _require_plain(sql, c)
            out.append(c)
            i += 1
    return "".join(out)


def _closing(sql: str, start: int) -> int:
    """The index just past the quote closing the string or name opened at `start`."""
    quote = sql[start]
    i = start + 1
    while i < len(sql):
        c = sql[i]
        if c == "\\":
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
    digits or accents."""
    for c in text:
        if c.isascii():
            if ord(c) >= 32 or c in "\t\n\r":
                continue
        elif unicodedata.category(c)[0] in "LNM":
            continue
        raise ForbiddenStatement(
            f"The character U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')}) is only allowed "
            "inside a quoted string: ClickHouse and the sandbox could read the query "
            "differently. Use plain spaces and ASCII punctuation.",
            sql=sql,
        )

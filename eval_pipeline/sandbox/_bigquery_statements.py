"""BigQuery's statement check for the sandbox: sqlglot's BigQuery dialect here, then BigQuery's own parser through a dry run before the job.

BigQuery has no read-only session, so a query job is read-only only by what it is sent. The
statement is parsed with sqlglot's `bigquery` dialect (`#`, `--` and `/* */` comments, raw
and triple-quoted strings, backquoted paths) and must be one query (SELECT, WITH, set
operations): no DML (INSERT, UPDATE, DELETE, MERGE, TRUNCATE), no DDL (CREATE, DROP,
ALTER, temporary functions), no scripting (DECLARE, SET, BEGIN … END, IF, LOOP,
EXECUTE IMMEDIATE, ASSERT), no CALL of a procedure, no EXPORT DATA or LOAD DATA (files in
Cloud Storage), no GRANT. Nor may it reach beyond BigQuery's tables: EXTERNAL_QUERY (a
federated database), EXTERNAL_OBJECT_TRANSFORM (signed URLs of objects) and any call
qualified by a dataset or a service (`ds.my_function(…)`: a persistent or remote function,
which may call a Cloud Function; `ML.…`, `AI.…`: models that may call Vertex AI and bill
apart) are refused; NET., HLL_COUNT., KLL_QUANTILES. and SAFE. prefixes name built-ins
and are allowed. The text is sent as written; the session's dry run then asks BigQuery
itself what the statement is, and anything but a SELECT is not run
(`warehouses.BigQueryConnection`).
"""

from __future__ import annotations

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

__all__ = ["ALLOWED_BIGQUERY", "REFUSED_BIGQUERY", "require_bigquery_reading_statement"]

ALLOWED_BIGQUERY = (
    "Each call runs exactly one read-only GoogleSQL query: SELECT (also WITH ... SELECT, "
    "UNION/INTERSECT/EXCEPT), as one BigQuery query job."
)
#: What is refused, as the refusals and the docs list it.
REFUSED_BIGQUERY = (
    "DML (INSERT, UPDATE, DELETE, MERGE, TRUNCATE), DDL (CREATE, DROP, ALTER, CREATE TEMP "
    "FUNCTION), scripting (DECLARE, SET, BEGIN … END, IF, LOOP, EXECUTE IMMEDIATE, ASSERT), "
    "CALL, EXPORT DATA, LOAD DATA, GRANT/REVOKE, EXTERNAL_QUERY, EXTERNAL_OBJECT_TRANSFORM, "
    "and functions qualified by a dataset or service (persistent and remote functions, "
    "ML.*, AI.*)"
)
#: Qualifiers of BigQuery's own built-in functions.
_BUILTIN_QUALIFIERS = frozenset({"NET", "SAFE", "HLL_COUNT", "KLL_QUANTILES"})
#: Built-ins that reach outside BigQuery's tables.
_EXTERNAL_FUNCTIONS = frozenset({"EXTERNAL_QUERY", "EXTERNAL_OBJECT_TRANSFORM"})
_READS = (exp.Query,)
_FILES = NO_FILES_ADVICE


def require_bigquery_reading_statement(sql: str) -> str:
    """The text to send BigQuery for `sql`, once sqlglot's BigQuery dialect reads it as one
    query that reaches nothing but tables.

    Raises:
        QueryFailed: the text could not be read (an unterminated string, a syntax error).
        ForbiddenStatement: not one query, or it calls what may reach outside BigQuery.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read="bigquery") if s is not None]
    except (ParseError, TokenError) as error:
        errors = getattr(error, "errors", None)
        first = errors[0]["description"] if errors else str(error)
        raise QueryFailed(
            f"The query could not be parsed as BigQuery GoogleSQL ({first}). Check the syntax, "
            f"or write it more simply. {ALLOWED_BIGQUERY}",
            sql=sql,
        ) from None
    require_one_statement(len(statements), sql, ALLOWED_BIGQUERY)
    statement = statements[0]
    if not isinstance(statement, _READS):
        word = sql.strip().split(None, 1)[0].upper() if sql.strip() else "This statement"
        files = isinstance(statement, exp.Export | exp.LoadData)
        raise ForbiddenStatement(
            f"{word} is not allowed here: BigQuery jobs run here are queries only (refused: "
            f"{REFUSED_BIGQUERY}). {_FILES if files else READ_ONLY_ADVICE} {ALLOWED_BIGQUERY}",
            sql=sql,
        )
    for node in statement.walk():
        if isinstance(node, exp.DML | exp.Create | exp.Drop | exp.Alter | exp.Command):
            raise ForbiddenStatement(
                f"Only a query may be nested in a query. {READ_ONLY_ADVICE} {ALLOWED_BIGQUERY}",
                sql=sql,
            )
        if isinstance(node, exp.Func):
            _require_builtin(node, sql)
    return sql.strip()


def _require_builtin(call: exp.Func, sql: str) -> None:
    name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).upper()
    if name in _EXTERNAL_FUNCTIONS:
        raise ForbiddenStatement(
            f"{name} reaches outside BigQuery's tables and is not allowed here. Query the "
            f"dataset's tables instead. {ALLOWED_BIGQUERY}",
            sql=sql,
        )
    parent = call.parent
    qualifier = None
    if isinstance(parent, exp.Dot) and parent.expression is call:
        qualifier = parent.this.sql("bigquery")
    elif isinstance(parent, exp.Table) and parent.this is call:
        qualifier = ".".join(
            p.sql("bigquery") for p in (parent.args.get("catalog"), parent.args.get("db")) if p
        )
    if qualifier and qualifier.strip("`").upper() not in _BUILTIN_QUALIFIERS:
        raise ForbiddenStatement(
            f"The function {qualifier}.{name} is not allowed: only BigQuery's built-in "
            "functions can be called (a function of a dataset may be a remote function that "
            "calls a service, and ML./AI. functions call models billed apart). "
            f"{ALLOWED_BIGQUERY}",
            sql=sql,
        )

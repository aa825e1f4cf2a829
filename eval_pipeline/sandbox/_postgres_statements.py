"""PostgreSQL's statement check for the sandbox: PostgreSQL's own parser, one read, only functions the server calls stable.

The statement is parsed by `pglast` (libpg_query: the server's own grammar, so what is
checked is what the server will run, comments and quotes included) and must be one SELECT
(WITH, VALUES and TABLE included), SHOW, or EXPLAIN of such a SELECT, with nothing inside
that writes, stores (SELECT INTO) or locks. Every function it calls must be one the server
itself declares immutable or stable (`pg_proc.provolatile`, read per connection by
`warehouses`; operators likewise by the function behind them), and not PARALLEL UNSAFE if
it came with the server: functions that run SQL given as text (`ts_stat`, `query_to_xml`),
read files (`pg_read_file`), signal sessions or change settings are volatile, one that
assigns a transaction id (`txid_current`) is parallel-unsafe, and any function this code
has never heard of is neither. Whatever cannot be parsed is refused too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pglast
from pglast import ast, enums

from eval_pipeline.sandbox._sandbox_errors import (
    NO_FILES_ADVICE,
    NO_INTO,
    NO_LOCKS,
    READ_ONLY_ADVICE,
    ForbiddenStatement,
    QueryFailed,
    require_one_statement,
)
from eval_pipeline.warehouses import StableCallables

__all__ = ["ALLOWED_POSTGRES", "require_postgres_reading_statement"]

ALLOWED_POSTGRES = (
    "Each call runs exactly one read-only query: SELECT (also WITH ... SELECT), VALUES, "
    "TABLE, SHOW, or EXPLAIN of a SELECT."
)
_WRITE = READ_ONLY_ADVICE
_FILES = NO_FILES_ADVICE
#: Volatile functions a read-only query may still call: they change nothing.
_CONTRACT_FUNCTIONS = frozenset({"random", "pg_catalog.random"})
#: Expressions written with an operator's name (`a + b`, `x = ANY (y)`); LIKE, BETWEEN and
#: the like are spelled by the grammar, not by an operator the user names.
_OPERATOR_KINDS = (
    enums.A_Expr_Kind.AEXPR_OP,
    enums.A_Expr_Kind.AEXPR_OP_ANY,
    enums.A_Expr_Kind.AEXPR_OP_ALL,
)
_WRITES = (
    ast.InsertStmt,
    ast.UpdateStmt,
    ast.DeleteStmt,
    ast.MergeStmt,
    ast.IntoClause,
    ast.LockingClause,
)


def require_postgres_reading_statement(sql: str, stable: StableCallables) -> None:
    """Refuse `sql` unless PostgreSQL's parser reads it as one read calling only functions
    and operators of `stable` (what the server declares immutable or stable).

    Raises:
        QueryFailed: the parser could not read it (the model fixes the syntax).
        ForbiddenStatement: not one read, or it calls a function that is not stable.
    """
    try:
        statements = pglast.parse_sql(sql)
    except pglast.parser.ParseError as error:
        raise QueryFailed(
            f"The query could not be parsed as PostgreSQL SQL ({error}). Check the syntax. "
            f"{ALLOWED_POSTGRES}",
            sql=sql,
        ) from None
    require_one_statement(len(statements), sql, ALLOWED_POSTGRES)
    statement = statements[0].stmt
    if isinstance(statement, ast.VariableShowStmt):
        return
    if isinstance(statement, ast.ExplainStmt):
        # EXPLAIN ANALYZE runs what it explains: that must pass every check a query does.
        if not isinstance(statement.query, ast.SelectStmt):
            raise ForbiddenStatement(
                f"EXPLAIN must be followed by one SELECT. {ALLOWED_POSTGRES}", sql=sql
            )
        statement = statement.query
    if not isinstance(statement, ast.SelectStmt):
        word = sql.strip().split(None, 1)[0].upper() if sql.strip() else "This statement"
        advice = _FILES if isinstance(statement, ast.CopyStmt) else _WRITE
        raise ForbiddenStatement(
            f"{word} is not allowed here. {advice} {ALLOWED_POSTGRES}", sql=sql
        )
    for node in _walk(statement):
        if isinstance(node, ast.IntoClause):
            raise ForbiddenStatement(NO_INTO, sql=sql)
        if isinstance(node, ast.LockingClause):
            raise ForbiddenStatement(NO_LOCKS, sql=sql)
        if isinstance(node, _WRITES):
            kind = type(node).__name__.removesuffix("Stmt").upper()
            raise ForbiddenStatement(f"{kind} inside a query is not allowed. {_WRITE}", sql=sql)
        stmt = type(node).__name__.endswith("Stmt")
        if stmt and not isinstance(node, ast.SelectStmt):
            raise ForbiddenStatement(
                f"Only SELECT can be nested in a query. {ALLOWED_POSTGRES}", sql=sql
            )
        if isinstance(node, ast.A_Expr) and node.kind in _OPERATOR_KINDS:
            name = ".".join(part.sval for part in node.name)
            if name not in stable.operators:
                raise ForbiddenStatement(
                    f"The operator {name} is not allowed: only operators the server declares "
                    "immutable or stable can be used.",
                    sql=sql,
                )
        if isinstance(node, ast.FuncCall):
            name = ".".join(part.sval for part in node.funcname)
            if name not in stable.functions and name not in _CONTRACT_FUNCTIONS:
                raise ForbiddenStatement(
                    f"The function {name} is not allowed: only functions the server declares "
                    "immutable or stable (and, among its own, safe in parallel) can be called "
                    "(no file, program, session, transaction or settings access, no SQL run "
                    "from a string). Use the tables and ordinary functions instead.",
                    sql=sql,
                )


def _walk(node: Any) -> Iterator[Any]:
    """Every node of a pglast tree, depth first."""
    if isinstance(node, ast.Node):
        yield node
        for slot in node.__slots__:
            yield from _walk(getattr(node, slot))
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _walk(item)

"""SQL as people read it: sqlglot's pretty printer, or the text as written when it cannot parse."""

from __future__ import annotations

import sqlglot

MAX_PRETTY = 20_000  # longer SQL is shown as written: formatting it would stall the page


def pretty_sql(sql: str) -> str:
    """Multi-line SQL from sqlglot's pretty printer; the text as written when it cannot parse."""
    if len(sql) > MAX_PRETTY:
        return sql
    try:
        return ";\n".join(sqlglot.transpile(sql, read="duckdb", write="duckdb", pretty=True))
    except Exception:  # any parser or generator failure: show what the agent wrote
        return sql

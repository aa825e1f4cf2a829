"""The SQL sandbox: one read-only statement at a time on a warehouse, time-limited and capped.

Whoever runs SQL on a warehouse goes through it: the built-in agent's queries, the
references, the warehouse variants of semantic checks, answer extraction. `open_sandbox`
gives a database's: `SqlSandbox` on DuckDB, `ServerSandbox` on the sessions of any other
engine with statement rules (PostgreSQL, MySQL/MariaDB: `_*_engine.py` are their adapters);
both return a `QueryResult` and raise a `SandboxError` written for the model, or
`WarehouseUnavailable` when the server is gone.
"""

from eval_pipeline.sandbox._ordering import sql_is_ordered
from eval_pipeline.sandbox._result_fetch import FetchCaps, fetch_capped_batches
from eval_pipeline.sandbox._sandbox import SandboxLimits, SqlSandbox
from eval_pipeline.sandbox._sandbox_errors import (
    ForbiddenStatement,
    QueryFailed,
    QueryTimeout,
    SandboxError,
    WarehouseUnavailable,
)
from eval_pipeline.sandbox._server_sandbox import ServerSandbox, open_sandbox, statement_rules
from eval_pipeline.sandbox._sql_result import QueryResult, to_json_safe

__all__ = [
    "FetchCaps",
    "ForbiddenStatement",
    "QueryFailed",
    "QueryResult",
    "QueryTimeout",
    "SandboxError",
    "SandboxLimits",
    "ServerSandbox",
    "SqlSandbox",
    "WarehouseUnavailable",
    "fetch_capped_batches",
    "open_sandbox",
    "sql_is_ordered",
    "statement_rules",
    "to_json_safe",
]

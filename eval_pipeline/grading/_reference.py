"""Expected answers: each case's reference SQL run on the warehouse, kept as data."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from eval_pipeline.sandbox import SandboxError, SqlSandbox, sql_is_ordered
from eval_pipeline.suite import Case


@dataclass(frozen=True)
class ReferenceResult:
    """What a case's reference SQL returned (or the error it raised) on one day's warehouse."""

    name: str
    sql: str
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None
    #: Reference-health warnings (`ReferenceWarning.to_row()`), never a failure.
    warnings: list[dict[str, str]] = field(default_factory=list)
    #: The `databases:` entry that answered (None in stores written before it was kept).
    database: str | None = None
    #: That database's `DatabaseConfig.fingerprint` when it answered (not stored).
    database_version: str | None = field(default=None, compare=False)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @cached_property
    def result_hash(self) -> str:
        """Changes when the expected answer changes: the data version downstream grades follow.

        Rows count in their order only when the SQL orders them (ORDER BY on the outermost
        query); otherwise the database may return the same rows in another order on every run,
        and that is the same answer, as the comparison with the agent's rows treats it.
        """
        rows = [json.dumps(row, default=str) for row in self.rows]
        if not sql_is_ordered(self.sql):
            rows.sort()
        payload = json.dumps([self.sql, self.columns, rows, self.error])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def data_version(self) -> str:
        """Changes when the expected answer or the database that gave it changes (its
        definition too: another server, file or schema), so grades follow either."""
        payload = json.dumps([self.result_hash, self.database, self.database_version])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_frame(self) -> pd.DataFrame:
        return frame_from_rows(self.columns, self.rows)

    def to_row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sql": self.sql,
            "columns": self.columns,
            "rows": self.rows,
            "row_count": self.row_count,
            "truncated": self.truncated,
            "error": self.error,
            "result_hash": self.result_hash,
            "warnings": self.warnings,
            "database": self.database,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ReferenceResult:
        return cls(
            name=row["name"],
            sql=row["sql"],
            columns=row["columns"] or [],
            rows=row["rows"] or [],
            truncated=bool(row.get("truncated")),
            error=row.get("error"),
            warnings=list(row.get("warnings") or []),
            database=row.get("database"),
        )


def frame_from_rows(columns: list[str], rows: list[list[Any]]) -> pd.DataFrame:
    """A DataFrame from column names and row lists, keeping duplicate names apart positionally."""
    frame = pd.DataFrame([list(r) for r in rows], columns=range(len(columns)), dtype=object)
    frame.columns = columns
    return frame


def case_reference(case: Case, sandbox: SqlSandbox) -> ReferenceResult:
    """Run one case's reference SQL; an error is kept (and fails the data check), not raised."""
    assert case.sql is not None
    try:
        result = sandbox.execute(case.sql)
    except SandboxError as error:
        return ReferenceResult(case.name, case.sql, error=f"the reference SQL failed: {error}")
    return ReferenceResult(
        name=case.name,
        sql=case.sql,
        columns=list(result.columns),
        rows=[list(row) for row in result.rows],
        truncated=result.truncated,
    )


def run_references(cases: Iterable[Case], sandbox: SqlSandbox) -> list[ReferenceResult]:
    """The reference result of every case that has reference SQL."""
    return [case_reference(case, sandbox) for case in cases if case.sql is not None]

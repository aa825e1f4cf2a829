"""What the built-in agent can learn about the warehouse: its tables, columns and dbt descriptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.sandbox import ServerSandbox, SqlSandbox
from eval_pipeline.suite import dbt_doc_files, load_yaml

_HIDDEN_SCHEMAS = ("information_schema", "pg_catalog")


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str
    description: str = ""


@dataclass(frozen=True)
class TableInfo:
    schema: str
    name: str
    description: str = ""
    columns: tuple[ColumnInfo, ...] = field(default_factory=tuple)
    #: The schema queries see without a qualifier ("main" in DuckDB, a server's search path).
    default_schema: str = "main"

    @property
    def qualified_name(self) -> str:
        """How a query names the table: bare in the default schema, `schema.table` elsewhere."""
        return self.name if self.schema == self.default_schema else f"{self.schema}.{self.name}"


def dbt_descriptions(dbt_project: Path | None) -> dict[str, tuple[str, dict[str, str]]]:
    """model name → (description, {column: description}) from the project's schema YAML files."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    if dbt_project is None:
        return found
    for path in dbt_doc_files(dbt_project):
        if path.suffix not in (".yml", ".yaml"):
            continue
        try:
            data: Any = load_yaml(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError):
            continue  # dbt itself reports a broken schema file; the agent just gets no docs
        if not isinstance(data, dict):
            continue
        for model in (data.get("models") or []) + (data.get("seeds") or []):
            if not isinstance(model, dict) or "name" not in model:
                continue
            columns = {
                str(c["name"]): str(c.get("description") or "").strip()
                for c in model.get("columns") or []
                if isinstance(c, dict) and "name" in c
            }
            found[str(model["name"])] = (str(model.get("description") or "").strip(), columns)
    return found


class WarehouseCatalog:
    """The warehouse's tables with their columns, types and dbt descriptions, read once."""

    def __init__(self, tables: list[TableInfo]) -> None:
        self.tables = tables

    @classmethod
    def load(cls, sandbox: SqlSandbox, dbt_project: Path | None = None) -> WarehouseCatalog:
        docs = dbt_descriptions(dbt_project)
        # DuckDB keeps `COMMENT ON` text in information_schema; dbt's docs win over it.
        listing = sandbox.execute(
            "SELECT c.table_schema, c.table_name, c.column_name, c.data_type, t.table_comment, "
            "c.column_comment FROM information_schema.columns c JOIN information_schema.tables t "
            "USING (table_catalog, table_schema, table_name) "
            f"WHERE c.table_schema NOT IN {_HIDDEN_SCHEMAS} ORDER BY c.table_schema <> 'main', "
            "c.table_schema, c.table_name, c.ordinal_position"
        )
        grouped: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        comments: dict[tuple[str, str], str] = {}
        for schema, table, column, data_type, table_comment, column_comment in listing.rows:
            grouped.setdefault((schema, table), []).append((column, data_type, column_comment))
            comments[(schema, table)] = table_comment or ""
        tables = []
        for (schema, table), columns in grouped.items():
            description, column_docs = docs.get(table, ("", {}))
            tables.append(
                TableInfo(
                    schema=schema,
                    name=table,
                    description=description or comments[(schema, table)],
                    columns=tuple(
                        ColumnInfo(c, t, column_docs.get(c) or comment or "")
                        for c, t, comment in columns
                    ),
                )
            )
        return cls(tables)

    @classmethod
    def from_server(
        cls, sandbox: ServerSandbox, dbt_project: Path | None = None
    ) -> WarehouseCatalog:
        """A server's tables of its schema, described by the dbt docs or else its comments."""
        docs = dbt_descriptions(dbt_project)
        schema = sandbox.database.schema or ""
        tables = []
        for table in sandbox.tables():
            description, column_docs = docs.get(table.name, ("", {}))
            columns = tuple(
                ColumnInfo(name, kind, column_docs.get(name) or comment)
                for name, kind, comment in table.columns
            )
            tables.append(
                TableInfo(schema, table.name, description or table.comment, columns, schema)
            )
        return cls(tables)

    def find(self, name: str) -> TableInfo | None:
        wanted = name.strip().strip('"').lower()
        for table in self.tables:
            if wanted in (table.qualified_name.lower(), f"{table.schema}.{table.name}".lower()):
                return table
        matches = [t for t in self.tables if t.name.lower() == wanted]
        return matches[0] if matches else None

    def list_text(self) -> str:
        lines = [
            f"- {t.qualified_name}: {t.description or '(no description)'}" for t in self.tables
        ]
        return "\n".join(lines) or "(the warehouse has no tables)"

    def describe_text(self, table: TableInfo) -> str:
        lines = [
            f"Table {table.qualified_name}: {table.description or '(no description)'}",
            "Columns:",
        ]
        for column in table.columns:
            doc = f" — {column.description}" if column.description else ""
            lines.append(f"- {column.name} ({column.type}){doc}")
        return "\n".join(lines)

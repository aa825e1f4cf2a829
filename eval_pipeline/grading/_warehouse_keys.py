"""A DuckDB warehouse's tables, their keys and the foreign keys between them (declared or guessed)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import duckdb

__all__ = ["Column", "ForeignKey", "Table", "WarehouseSchema", "read_schema"]

_INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT"}
    | {"UINTEGER", "UBIGINT", "UHUGEINT"}
)
_ID = re.compile(r"^(?P<stem>.+)_id$", re.IGNORECASE)


@dataclass(frozen=True)
class Column:
    name: str
    data_type: str
    #: Declared nullable (no NOT NULL / PRIMARY KEY constraint).
    nullable: bool
    #: The base data holds at least one NULL in it.
    has_nulls: bool

    @property
    def kind(self) -> str:
        """`integer`, `number` (decimal/float), `date`, `timestamp` or `other`."""
        base = self.data_type.upper().split("(")[0]
        if base in _INTEGER_TYPES:
            return "integer"
        if base in ("DECIMAL", "NUMERIC", "FLOAT", "DOUBLE", "REAL"):
            return "number"
        if base == "DATE":
            return "date"
        if base.startswith("TIMESTAMP"):
            return "timestamp"
        return "other"


@dataclass(frozen=True)
class ForeignKey:
    """`table.column` references `parent.parent_column` (all in `schema`)."""

    schema: str
    table: str
    column: str
    parent: str
    parent_column: str
    declared: bool


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[Column, ...]
    row_count: int
    #: Columns whose values identify a row (declared PRIMARY KEY/UNIQUE, or a unique `id` /
    #: `<singular name>_id`, or referenced by a foreign key).
    keys: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        return f"{_quote(self.schema)}.{_quote(self.name)}"


@dataclass(frozen=True)
class WarehouseSchema:
    """Base tables in dependency order (a table after the tables it references), views, keys."""

    tables: tuple[Table, ...]
    foreign_keys: tuple[ForeignKey, ...]
    #: (schema, name, CREATE VIEW statement), in creation order.
    views: tuple[tuple[str, str, str], ...] = field(default=())

    def parents_of(self, table: Table) -> list[ForeignKey]:
        return [
            fk for fk in self.foreign_keys if (fk.schema, fk.table) == (table.schema, table.name)
        ]


def read_schema(connection: duckdb.DuckDBPyConnection, catalog: str) -> WarehouseSchema:
    """Read the tables, views and keys of the database attached as `catalog`.

    Foreign keys declared in DuckDB are used when the warehouse declares any. Otherwise (dbt
    builds tables without constraints) they are guessed from names: a column `<stem>_id` in a
    table references the one other table of the same schema named `<stem>`, `<stem>s`,
    `<stem>es` or `<ste>ies` (or ending in `_` and one of those, so `channel_id` finds
    `marketing_channels`), through its column `id` or `<stem>_id`, and only when that column's
    values are unique in the data. A longer stem is tried first, then its last words
    (`acquisition_channel_id` tries `acquisition_channel`, then `channel`). A guess that finds
    no table or several is dropped: a missed key only loosens the sampling, a wrong one would
    empty a table.
    """
    tables = _tables(connection, catalog)
    declared = _declared_foreign_keys(connection, catalog)
    if declared:
        foreign_keys = declared
    else:
        foreign_keys = [
            fk
            for table in tables
            for fk in _guessed_foreign_keys(connection, catalog, table, tables)
        ]
    referenced: dict[tuple[str, str], set[str]] = {}
    for fk in foreign_keys:
        referenced.setdefault((fk.schema, fk.parent), set()).add(fk.parent_column)
    declared_keys = _declared_keys(connection, catalog)
    keyed = []
    for table in tables:
        keys = set(declared_keys.get((table.schema, table.name), ()))
        keys |= referenced.get((table.schema, table.name), set())
        own = _own_key(connection, catalog, table)
        if own:
            keys.add(own)
        keyed.append(
            Table(table.schema, table.name, table.columns, table.row_count, tuple(sorted(keys)))
        )
    views = tuple(
        (schema, name, sql)
        for schema, name, sql in connection.execute(
            "SELECT schema_name, view_name, sql FROM duckdb_views() "
            "WHERE database_name = ? AND NOT internal ORDER BY view_oid",
            [catalog],
        ).fetchall()
    )
    return WarehouseSchema(_dependency_order(keyed, foreign_keys), tuple(foreign_keys), views)


def _tables(connection: duckdb.DuckDBPyConnection, catalog: str) -> list[Table]:
    rows = connection.execute(
        "SELECT schema_name, table_name, column_name, data_type, is_nullable "
        "FROM duckdb_columns() WHERE database_name = ? AND NOT internal "
        "AND (schema_name, table_name) IN (SELECT (schema_name, table_name) FROM duckdb_tables() "
        "WHERE database_name = ? AND NOT temporary) ORDER BY schema_name, table_name, column_index",
        [catalog, catalog],
    ).fetchall()
    grouped: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    for schema, name, column, data_type, nullable in rows:
        grouped.setdefault((schema, name), []).append((column, data_type, bool(nullable)))
    tables = []
    for (schema, name), columns in grouped.items():
        qualified = f"{_quote(catalog)}.{_quote(schema)}.{_quote(name)}"
        counts = ", ".join(f"COUNT({_quote(c)})" for c, _, _ in columns)
        total, *non_null = connection.execute(
            f"SELECT COUNT(*), {counts} FROM {qualified}"
        ).fetchall()[0]
        tables.append(
            Table(
                schema,
                name,
                tuple(
                    Column(c, t, nullable, has_nulls=filled < total)
                    for (c, t, nullable), filled in zip(columns, non_null, strict=True)
                ),
                total,
            )
        )
    return tables


def _declared_foreign_keys(connection: duckdb.DuckDBPyConnection, catalog: str) -> list[ForeignKey]:
    rows = connection.execute(
        "SELECT schema_name, table_name, constraint_column_names, referenced_table, "
        "referenced_column_names FROM duckdb_constraints() "
        "WHERE database_name = ? AND constraint_type = 'FOREIGN KEY'",
        [catalog],
    ).fetchall()
    keys = []
    for schema, table, columns, parent, parent_columns in rows:
        # A composite key is followed on its first column only: a row may then outlive its
        # parent when another parent shares that column's value (sampling is looser, no
        # row is wrongly dropped).
        if columns and parent_columns:
            keys.append(ForeignKey(schema, table, columns[0], parent, parent_columns[0], True))
    return keys


def _declared_keys(
    connection: duckdb.DuckDBPyConnection, catalog: str
) -> dict[tuple[str, str], list[str]]:
    rows = connection.execute(
        "SELECT schema_name, table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE database_name = ? AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') "
        "AND len(constraint_column_names) = 1",
        [catalog],
    ).fetchall()
    keys: dict[tuple[str, str], list[str]] = {}
    for schema, table, columns in rows:
        keys.setdefault((schema, table), []).append(columns[0])
    return keys


def _guessed_foreign_keys(
    connection: duckdb.DuckDBPyConnection, catalog: str, table: Table, tables: list[Table]
) -> list[ForeignKey]:
    found = []
    same_schema = [t for t in tables if t.schema == table.schema and t.name != table.name]
    for column in table.columns:
        match = _ID.match(column.name)
        if not match or column.kind not in ("integer", "other"):
            continue
        words = match["stem"].lower().split("_")
        for start in range(len(words)):
            stem = "_".join(words[start:])
            if _is_own_stem(stem, table.name):
                break
            candidates = [
                (parent, key)
                for parent in same_schema
                if _names_stem(parent.name, stem)
                for key in (f"{stem}_id", "id")
                if any(c.name.lower() == key for c in parent.columns)
            ]
            if len(candidates) == 1:
                parent, key = candidates[0]
                key = next(c.name for c in parent.columns if c.name.lower() == key)
                if _unique(connection, catalog, parent, key):
                    found.append(
                        ForeignKey(table.schema, table.name, column.name, parent.name, key, False)
                    )
                break
            if candidates:
                break  # ambiguous: guessing could join the wrong table
    return found


def _plurals(stem: str) -> set[str]:
    forms = {stem, stem + "s", stem + "es"}
    if stem.endswith("y"):
        forms.add(stem[:-1] + "ies")
    return forms


def _names_stem(name: str, stem: str) -> bool:
    name = name.lower()
    return any(name == form or name.endswith("_" + form) for form in _plurals(stem))


def _is_own_stem(stem: str, table_name: str) -> bool:
    return _names_stem(table_name, stem)


def _own_key(connection: duckdb.DuckDBPyConnection, catalog: str, table: Table) -> str | None:
    """`id` or `<singular name>_id` when its values are unique: the table's own key."""
    names = {c.name.lower(): c.name for c in table.columns}
    words = table.name.lower().split("_")
    for candidate in ["id"] + [
        f"{stem}_id" for i in range(len(words)) for stem in _singulars("_".join(words[i:]))
    ]:
        if candidate in names and _unique(connection, catalog, table, names[candidate]):
            return names[candidate]
    return None


def _singulars(name: str) -> list[str]:
    forms = [name]
    if name.endswith("ies"):
        forms.append(name[:-3] + "y")
    if name.endswith("es"):
        forms.append(name[:-2])
    if name.endswith("s"):
        forms.append(name[:-1])
    return forms


def _unique(connection: duckdb.DuckDBPyConnection, catalog: str, table: Table, column: str) -> bool:
    row = connection.execute(
        f"SELECT COUNT(DISTINCT {_quote(column)}) = COUNT({_quote(column)}) AND COUNT({_quote(column)}) > 0 "
        f"FROM {_quote(catalog)}.{table.qualified}"
    ).fetchall()[0]
    return bool(row[0])


def _dependency_order(tables: list[Table], foreign_keys: list[ForeignKey]) -> tuple[Table, ...]:
    """Tables after the tables they reference; a reference cycle is broken at its first table."""
    by_name = {(t.schema, t.name): t for t in tables}
    parents = {key: set() for key in by_name}
    for fk in foreign_keys:
        if (fk.schema, fk.parent) in by_name and fk.parent != fk.table:
            parents[(fk.schema, fk.table)].add((fk.schema, fk.parent))
    ordered: list[Table] = []
    done: set[tuple[str, str]] = set()
    visiting: set[tuple[str, str]] = set()

    def visit(key: tuple[str, str]) -> None:
        if key in done or key in visiting:
            return
        visiting.add(key)
        for parent in sorted(parents[key]):
            visit(parent)
        visiting.discard(key)
        done.add(key)
        ordered.append(by_name[key])

    for key in sorted(by_name):
        visit(key)
    return tuple(ordered)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

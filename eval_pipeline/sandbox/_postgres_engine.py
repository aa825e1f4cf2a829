"""PostgreSQL as a warehouse engine: ADBC sessions (`warehouses`) and PostgreSQL's own parser as the sandbox's rules."""

from __future__ import annotations

from eval_pipeline.sandbox._postgres_statements import require_postgres_reading_statement
from eval_pipeline.suite import DatabaseConfig, Engine
from eval_pipeline.warehouses import PostgresConnection, StableCallables

__all__ = ["ENGINE"]


def _connect(database: DatabaseConfig) -> PostgresConnection:
    return PostgresConnection(database, database.resolve_url())


def _reading_statement(sql: str, stable: StableCallables) -> str:
    require_postgres_reading_statement(sql, stable)
    return sql  # the server reads it as its parser just did


ENGINE = Engine(
    name="postgres",
    label="PostgreSQL",
    dialect="postgres",
    connect=_connect,
    reading_statement=_reading_statement,
    url_schemes=("postgresql", "postgres"),
    nao_type="postgres",
    default_port=5432,
    # pg_catalog for the comments: information_schema has none.
    catalogue_sql="""
        SELECT c.table_name, c.column_name, c.data_type,
               obj_description(format('%I.%I', c.table_schema, c.table_name)::regclass, 'pg_class'),
               col_description(format('%I.%I', c.table_schema, c.table_name)::regclass,
                               c.ordinal_position::int)
        FROM information_schema.columns AS c
        JOIN information_schema.tables AS t USING (table_catalog, table_schema, table_name)
        WHERE c.table_schema = current_schema()
        ORDER BY c.table_name, c.ordinal_position
    """,
)

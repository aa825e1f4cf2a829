"""MySQL and MariaDB as one warehouse engine: PyMySQL sessions (`warehouses`) and the server's lexing rules with sqlglot as the sandbox's rules."""

from __future__ import annotations

from eval_pipeline.sandbox._mysql_statements import require_mysql_reading_statement
from eval_pipeline.suite import DatabaseConfig, Engine
from eval_pipeline.warehouses import MySqlConnection, StableCallables

__all__ = ["ENGINE"]


def _connect(database: DatabaseConfig) -> MySqlConnection:
    return MySqlConnection(database, database.resolve_url())


def _reading_statement(sql: str, stable: StableCallables) -> str:
    # MySQL keeps no volatility marks (`stable` is empty); what is sent is the text without
    # its comments, as the check read it.
    return require_mysql_reading_statement(sql)


ENGINE = Engine(
    name="mysql",
    label="MySQL/MariaDB",
    dialect="mysql",
    connect=_connect,
    reading_statement=_reading_statement,
    url_schemes=("mysql", "mariadb"),
    type_note="(MySQL and MariaDB)",
    nao_type="mysql",
    default_port=3306,
    identifier_quote="`",
    catalogue_sql="""
        SELECT c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, t.TABLE_COMMENT, c.COLUMN_COMMENT
        FROM information_schema.COLUMNS AS c
        JOIN information_schema.TABLES AS t
          ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
        WHERE c.TABLE_SCHEMA = DATABASE()
        ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION
    """,
)

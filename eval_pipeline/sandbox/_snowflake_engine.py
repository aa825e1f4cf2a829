"""Snowflake as a warehouse engine: `snowflake-connector-python` sessions (`warehouses`) and Snowflake's lexing rules with sqlglot as the sandbox's rules."""

from __future__ import annotations

from urllib.parse import urlsplit

from eval_pipeline.sandbox._snowflake_statements import require_snowflake_reading_statement
from eval_pipeline.suite import DatabaseConfig, Engine, MissingSecret
from eval_pipeline.warehouses import SnowflakeConnection, StableCallables, snowflake_options

__all__ = ["ENGINE", "nao_url"]

#: nao's optional fields (`cli/nao_core/config/databases/snowflake.py`) carried as the URL's
#: query parameters, and ours that nao ignores (a role; a host, port and protocol for a
#: private link or an emulator).
_QUERY_FIELDS = (
    "warehouse",
    "role",
    "private_key_path",
    "passphrase",
    "authenticator",
    "host",
    "port",
    "protocol",
)


def _connect(database: DatabaseConfig) -> SnowflakeConnection:
    return SnowflakeConnection(database, database.resolve_url())


def _reading_statement(sql: str, stable: StableCallables) -> str:
    # Snowflake keeps no volatility marks (`stable` is empty); what is sent is the text without
    # its comments, as the check read it.
    return require_snowflake_reading_statement(sql)


def nao_url(fields: dict[str, str]) -> str:
    """The URL of a nao Snowflake database from nao's fields (`username`, `account_id`,
    `password` or `private_key_path` with `passphrase`, `database`, `schema`, `warehouse`,
    `authenticator`), each already percent-encoded.

    Raises:
        KeyError: `username`, `account_id` or `database` is missing.
    """
    login = fields["username"] + (f":{fields['password']}" if fields.get("password") else "")
    path = fields["database"]
    schema = fields.get("schema") or fields.get("schema_name")
    if schema:
        path += f"/{schema}"
    query = "&".join(f"{key}={fields[key]}" for key in _QUERY_FIELDS if fields.get(key))
    return f"snowflake://{login}@{fields['account_id']}/{path}" + (f"?{query}" if query else "")


def _run_note(database: DatabaseConfig) -> str | None:
    """The warehouse whose credits the references and the agent's queries spend."""
    try:
        warehouse = snowflake_options(database.resolve_url()).get("warehouse")
    except (ValueError, MissingSecret):
        return None  # the connection names what is wrong
    where = f"warehouse {warehouse!r}" if warehouse else "the user's default warehouse"
    account = urlsplit(database.resolve_url()).netloc.rpartition("@")[2]
    return (
        f"note: database {database.name!r} ({database.type}) runs its queries on {where} of "
        f"account {account!r}, whose credits they spend (each tagged QUERY_TAG=eval_pipeline)"
    )


ENGINE = Engine(
    name="snowflake",
    label="Snowflake",
    dialect="snowflake",
    connect=_connect,
    reading_statement=_reading_statement,
    url_schemes=("snowflake",),
    nao_type="snowflake",
    nao_url=nao_url,
    catalogue_sql="""
        SELECT c.table_name, c.column_name,
               CASE WHEN c.data_type = 'NUMBER'
                    THEN 'NUMBER(' || c.numeric_precision || ',' || c.numeric_scale || ')'
                    ELSE c.data_type END,
               t.comment, c.comment
        FROM information_schema.columns AS c
        JOIN information_schema.tables AS t
          ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = CURRENT_SCHEMA()
        ORDER BY c.table_name, c.ordinal_position
    """,
    run_note=_run_note,
)

"""ClickHouse as a warehouse engine: clickhouse-driver sessions under the user's `readonly` setting (`warehouses`) and ClickHouse's lexing rules with sqlglot as the sandbox's rules."""

from __future__ import annotations

from eval_pipeline.sandbox._clickhouse_statements import require_clickhouse_reading_statement
from eval_pipeline.suite import DatabaseConfig, Engine
from eval_pipeline.warehouses import ClickHouseConnection, StableCallables

__all__ = ["ENGINE", "nao_url"]

#: nao's `protocol: http` ports and the native ports of the same server (ClickHouse's own
#: defaults): the client here speaks the native protocol only.
_NATIVE_PORT_OF_HTTP = {"8123": "9000", "8443": "9440"}
#: nao's fields carried as the URL's options (nao's names are the driver's).
_OPTIONS = ("secure", "verify", "connect_timeout", "send_receive_timeout")


def _connect(database: DatabaseConfig) -> ClickHouseConnection:
    return ClickHouseConnection(database, database.resolve_url())


def _reading_statement(sql: str, stable: StableCallables) -> str:
    # ClickHouse keeps no volatility marks (`stable` is empty); what is sent is the text
    # without its comments, as the check read it.
    return require_clickhouse_reading_statement(sql)


def nao_url(fields: dict[str, str]) -> str:
    """`clickhouse://user:password@host:port/database?secure=...` from a nao ClickHouse
    database's fields (host, port, database, user, password, secure, verify, protocol,
    connect_timeout, send_receive_timeout).

    Raises:
        KeyError: host, database or user is missing.
        ValueError: `protocol: http` on a port that is not ClickHouse's HTTP default.
    """
    host, database, user = fields["host"], fields["database"], fields["user"]
    secure = fields.get("secure", "false").lower() in ("true", "1", "yes")
    port = fields.get("port")
    if fields.get("protocol", "http") != "native" and port is not None:
        if port not in _NATIVE_PORT_OF_HTTP:
            raise ValueError(
                f"protocol http on port {port}: eval-pipeline reads ClickHouse over its native "
                "protocol; give `protocol: native` and the server's native port (9000, or "
                "9440 with secure: true)"
            )
        port = _NATIVE_PORT_OF_HTTP[port]
    port = port or ("9440" if secure else "9000")
    login = user + (f":{fields['password']}" if fields.get("password") else "")
    options = "&".join(f"{key}={fields[key].lower()}" for key in _OPTIONS if key in fields)
    return f"clickhouse://{login}@{host}:{port}/{database}" + (f"?{options}" if options else "")


ENGINE = Engine(
    name="clickhouse",
    label="ClickHouse",
    dialect="clickhouse",
    connect=_connect,
    reading_statement=_reading_statement,
    url_schemes=("clickhouse",),
    nao_type="clickhouse",
    default_port=9000,
    nao_url=nao_url,
    identifier_quote="`",
    # No ORDER BY: the server lists tables by name and each table's columns in their order
    # (system.columns has no position column before version 20). Table comments are not
    # read: servers before version 21 have none.
    catalogue_sql="""
        SELECT table, name, type, '' AS table_comment, comment
        FROM system.columns
        WHERE database = currentDatabase()
    """,
)

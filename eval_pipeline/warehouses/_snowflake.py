"""Snowflake sessions through `snowflake-connector-python`, results streamed as the connector's Arrow batches.

A database's URL is `snowflake://user[:password]@account/database[/schema]` with the
connector's options as query parameters: `warehouse`, `role`, `private_key_path` and
`passphrase` (key-pair login), `authenticator`, and `host`, `port`, `protocol` for a server
reached at another address than the account's (a private link, an emulator). The session
runs in UTC, tagged `eval_pipeline` (QUERY_TAG), one statement per call; each statement is
stopped by the server at the time limit (STATEMENT_TIMEOUT_IN_SECONDS) and cancelled through
the connector's own abort request from the sandbox's watchdog.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._arrow import duckdb_type_name, rows_to_batch
from eval_pipeline.warehouses._connection import (
    CONNECT_TIMEOUT_S,
    CellBounds,
    Stream,
    WarehouseConnection,
)
from eval_pipeline.warehouses._errors import (
    ConnectionFailed,
    StatementFailed,
    StatementTimeout,
    WarehouseError,
    short_cause,
)
from eval_pipeline.warehouses._privileges import judge_privileges
from eval_pipeline.warehouses._snowflake_grants import (
    Grant,
    grants_held,
    secondary_roles,
    snowflake_read_only_recipe,
)
from eval_pipeline.warehouses._snowflake_types import arrow_type_of, conform_batch

__all__ = ["SNOWFLAKE_EXTRA", "SnowflakeConnection", "snowflake_options"]

SNOWFLAKE_EXTRA = "pip install 'eval-pipeline[snowflake]'"
#: The connector's options a URL may give as query parameters, and nothing else: an unknown
#: one is refused by name rather than ignored.
_OPTIONS = frozenset(
    {
        "warehouse",
        "role",
        "private_key_path",
        "passphrase",
        "authenticator",
        "token",
        "host",
        "port",
        "protocol",
    }
)
#: Snowflake's error numbers for a statement stopped by its time limit (000630) or cancelled
#: (000604).
_STOPPED = (604, 630)
#: Errors after which the session cannot go on: the network failed, or the session expired.
_LOST = (250001, 250002, 250003, 251001, 251005, 251006, 390111, 390112, 390114)
#: What is said when the URL gives no warehouse and the user has no default one.
_NO_WAREHOUSE = (
    "no warehouse to run queries on: add ?warehouse=<name> to the URL (`warehouse:` in "
    "nao_config.yaml) or give the user a DEFAULT_WAREHOUSE"
)


def snowflake_options(url: str) -> dict[str, Any]:
    """The connector's keyword arguments for a `snowflake://` URL (the key file not read).

    Raises:
        ValueError: the URL names no account, no user, or an option the connector is not
            given from a URL.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    login, _, account = netloc.rpartition("@")
    user, _, password = login.partition(":")
    if not account:
        raise ValueError("the URL names no account (snowflake://user@account/database)")
    if not user:
        raise ValueError("the URL names no user (snowflake://user@account/database)")
    path = [unquote(p) for p in parts.path.strip("/").split("/") if p]
    options: dict[str, Any] = {"account": unquote(account), "user": unquote(user)}
    if password:
        options["password"] = unquote(password)
    if path:
        options["database"] = path[0]
    if len(path) > 1:
        options["schema"] = path[1]
    for key, value in parse_qsl(parts.query, keep_blank_values=False):
        if key not in _OPTIONS:
            raise ValueError(
                f"unknown option {key!r} in the URL (known: {', '.join(sorted(_OPTIONS))})"
            )
        options[key] = int(value) if key == "port" else value
    return options


class SnowflakeConnection(WarehouseConnection):
    dialect = "snowflake"

    def __init__(self, database: DatabaseConfig, url: str) -> None:
        super().__init__(database)
        try:
            import snowflake.connector
            import snowflake.connector.errors
        except ImportError:
            raise ConnectionFailed(
                f"{self.label}: the Snowflake client is not installed; {SNOWFLAKE_EXTRA}"
            ) from None
        # The connector logs every retry at INFO and WARNING; its errors reach us as exceptions.
        logging.getLogger("snowflake.connector").setLevel(logging.ERROR)
        self._errors = snowflake.connector.errors.Error
        self._not_arrow = snowflake.connector.errors.NotSupportedError
        try:
            options = snowflake_options(url)
        except ValueError as error:
            raise ConnectionFailed(f"{self.label}: {error}") from None
        if database.schema:
            options["schema"] = database.schema
        key_path = options.pop("private_key_path", None)
        passphrase = options.pop("passphrase", None)
        if key_path is not None:
            options["private_key"] = self._private_key(key_path, passphrase)
            options.setdefault("authenticator", "SNOWFLAKE_JWT")
        self._timeout_s: int | None = None
        self._lock = threading.Lock()
        self._cursor: Any = None
        self._sql = ""
        try:
            self._connection = snowflake.connector.connect(
                **options,
                login_timeout=CONNECT_TIMEOUT_S,
                client_session_keep_alive=False,
                client_prefetch_threads=1,
                application="eval_pipeline",
                session_parameters={
                    "QUERY_TAG": "eval_pipeline",
                    "TIMEZONE": "UTC",
                    "MULTI_STATEMENT_COUNT": 1,
                },
            )
        except self._errors as error:
            raise ConnectionFailed(f"{self.label}: cannot connect: {_text(error)}") from None
        except Exception as error:  # the connector's own checks (a bad account name, ...)
            raise ConnectionFailed(f"{self.label}: cannot connect: {short_cause(error)}") from None
        try:
            self._setup(options)
        except BaseException:
            self.close()
            raise

    def _private_key(self, path: str, passphrase: str | None) -> bytes:
        """The key-pair login's private key (PEM, encrypted with `passphrase` or not), as DER."""
        from cryptography.hazmat.primitives import serialization

        try:
            with open(path, "rb") as handle:
                key = serialization.load_pem_private_key(
                    handle.read(), password=passphrase.encode() if passphrase else None
                )
        except (OSError, ValueError, TypeError) as error:
            raise ConnectionFailed(
                f"{self.label}: cannot read the private key {path}: {short_cause(error)}"
            ) from None
        return key.private_bytes(
            encoding=serialization.Encoding.DER,
            format=serialization.PrivateFormat.PKCS8,
            encryption_algorithm=serialization.NoEncryption(),
        )

    def _setup(self, options: dict[str, Any]) -> None:
        role, secondary, dbname, schema, warehouse, user = self._row(
            "SELECT CURRENT_ROLE(), CURRENT_SECONDARY_ROLES(), CURRENT_DATABASE(), "
            "CURRENT_SCHEMA(), CURRENT_WAREHOUSE(), CURRENT_USER()"
        )
        # Snowflake opens the session whatever database, schema or warehouse it was given,
        # and leaves the ones it cannot use unset.
        for asked, found, what in (
            (options.get("database"), dbname, "database"),
            (options.get("schema"), schema, "schema"),
            (options.get("warehouse"), warehouse, "warehouse"),
        ):
            if asked and not found:
                raise ConnectionFailed(
                    f"{self.label}: {what} {asked!r} does not exist (or the role "
                    f"{role} cannot use it); fix it in the database's URL or grant the role "
                    "USAGE on it"
                )
        if not warehouse:
            raise ConnectionFailed(f"{self.label}: {_NO_WAREHOUSE}")
        held = grants_held([role, *secondary_roles(secondary)], self._grants_of)
        recipe = snowflake_read_only_recipe(
            str(user or options["user"]), str(dbname or "<database>"), schema, str(warehouse)
        )
        judge_privileges(self.database, self.label, held, recipe)

    def _grants_of(self, kind: str, name: str) -> list[Grant]:
        cursor = self._connection.cursor(_dict_cursor())
        try:
            # A database role is named `database.role`: each part quoted on its own.
            parts = name.split(".", 1) if kind == "DATABASE ROLE" else [name]
            cursor.execute(f"SHOW GRANTS TO {kind} {'.'.join(map(_identifier, parts))}")
            return [Grant.from_row(row) for row in cursor.fetchall()]
        except self._errors as error:
            raise ConnectionFailed(
                f"{self.label}: cannot read the grants of {kind.lower()} {name}: {_text(error)}"
            ) from None
        finally:
            cursor.close()

    def _row(self, sql: str) -> tuple:
        cursor = self._connection.cursor()
        try:
            cursor.execute(sql)
            return tuple(cursor.fetchone())
        except self._errors as error:
            raise ConnectionFailed(f"{self.label}: {_text(error)}") from None
        finally:
            cursor.close()

    def begin_read_only(self, timeout_s: float) -> None:
        # Read-only by the role (checked when the session opened) and the sandbox's rules:
        # Snowflake has no read-only transaction. The server stops a statement at the limit.
        self.end()
        seconds = max(1, math.ceil(timeout_s))
        if seconds == self._timeout_s:
            return
        cursor = self._connection.cursor()
        try:
            cursor.execute(f"ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = {seconds}")
        except self._errors as error:
            raise self._translate(error) from None
        finally:
            cursor.close()
        self._timeout_s = seconds

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        cursor = self._connection.cursor()
        with self._lock:
            self._cursor, self._sql = cursor, sql
        try:
            cursor.execute(sql)
        except self._errors as error:
            raise self._translate(error) from None
        description = cursor.description or ()
        names = [d.name for d in description]
        kinds = [arrow_type_of(d.type_code, d.precision, d.scale) for d in description]
        types = [duckdb_type_name(kind) for kind in kinds]

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                try:
                    tables = cursor.fetch_arrow_batches(force_microsecond_precision=True)
                except self._not_arrow:
                    # SHOW and DESCRIBE answer in JSON rows: metadata, a few rows.
                    while rows := cursor.fetchmany(1_000):
                        yield conform_batch(rows_to_batch(names, rows), kinds)
                    return
                for table in tables:
                    for batch in table.to_batches():
                        yield conform_batch(batch, kinds)
            except self._errors as error:
                raise self._translate(error) from None

        return Stream(names, types, batches() if description else iter(()))

    def cancel(self) -> None:
        # The connector's own cancellation (what its `timeout=` uses): the server stops the
        # statement this session's request started.
        with self._lock:
            cursor, sql = self._cursor, self._sql
        request_id = getattr(cursor, "_request_id", None)
        if request_id is None or self.broken:
            return
        with contextlib.suppress(Exception):
            self._connection._cancel_query(sql, request_id)

    def end(self) -> None:
        with self._lock:
            cursor, self._cursor = self._cursor, None
        if cursor is not None:
            with contextlib.suppress(Exception):
                cursor.close()

    def close(self) -> None:
        self.end()
        with contextlib.suppress(Exception):
            self._connection.close()

    def _translate(self, error: Exception) -> WarehouseError:
        errno = getattr(error, "errno", None)
        if errno in _STOPPED:
            return StatementTimeout(f"{self.label}: the statement was stopped: {_text(error)}")
        if errno in _LOST or (isinstance(errno, int) and 390000 <= errno < 391000):
            self.broken = True
            return ConnectionFailed(f"{self.label}: lost the connection: {_text(error)}")
        return StatementFailed(_text(error))


def _text(error: Exception) -> str:
    """The connector's message, with Snowflake's error number and without its noise."""
    errno = getattr(error, "errno", None)
    message = getattr(error, "msg", None) or str(error)
    text = str(message)
    if isinstance(errno, int) and errno > 0 and str(errno) not in text[:16]:
        text = f"{errno:06d}: {text}"
    return short_cause(Exception(text))


def _dict_cursor() -> Any:
    from snowflake.connector import DictCursor

    return DictCursor


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

"""ClickHouse sessions through clickhouse-driver (the native protocol), its blocks read as NumPy and Arrow buffers.

A ClickHouse server has no transactions: what keeps a session to reading is the user's
`readonly` setting (1: reads only, no table functions, no settings changed by the client;
2: reads and settings, table functions too), read from the server when the session opens.
A user with `readonly = 0` may insert, alter, create and drop, so it is refused with the
recipe of a read-only profile unless `allow_privileged_role`, and even then every query it
sends carries `readonly = 2`. Where the session may change settings (`readonly` 2 or 0),
each query carries the time limit (`max_execution_time`) and a small block
(`max_block_size`): the sandbox reads the result block by block and stops at its caps, and
the rest is cancelled on the server (no `max_result_bytes`: its `break` mode would end a
result early without a word, and the server counts bytes otherwise than the caps do).
Under `readonly = 1` a current server refuses (18.16 ignores) a setting sent by the client,
so the profile's own limits hold and the watchdog's `KILL QUERY` stops a statement past
its time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._arrow import duckdb_type_name
from eval_pipeline.warehouses._clickhouse_types import arrow_batches, needs_python_values
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

#: The driver logs a warning for every column it reads as Python values rather than NumPy
#: (Decimal, Array...), and a traceback for every address it fails to reach: expected here,
#: or said in one line by the error this module raises.
logging.getLogger("clickhouse_driver").setLevel(logging.ERROR)

__all__ = ["CLICKHOUSE_OPTIONS", "ClickHouseConnection", "clickhouse_read_only_recipe"]

#: The query parameters a `clickhouse://` URL may carry (nao's names for the same options).
CLICKHOUSE_OPTIONS = frozenset({"secure", "verify", "connect_timeout", "send_receive_timeout"})
#: Seconds the driver waits on a silent socket: the server sends progress every 100 ms while
#: a query runs, so a silence this long is a frozen or vanished server.
NETWORK_GRACE_S = 20
#: Rows per block the server sends (where the session may set it): one block is what the
#: driver holds at once, so a small block keeps one read of the result small.
BLOCK_ROWS = 8_192
#: Server error codes: the query's time ran out, it was cancelled (KILL QUERY), and the
#: ways a login fails (unknown user, wrong password, 20.x's single code for both).
_TIMEOUT_CODES = frozenset({159, 394})
_LOGIN_CODES = frozenset({192, 193, 516})
_UNKNOWN_DATABASE = 81
_PACKET_DATA = 1  # clickhouse_driver.protocol.ServerPacketTypes.DATA


def clickhouse_read_only_recipe(dbname: str) -> str:
    """How to make a read-only ClickHouse user for `dbname`, on one line: SQL where the server
    has access control (20.5 and later), users.xml where it has only profiles."""
    return (
        "CREATE USER eval_reader IDENTIFIED BY '…' SETTINGS readonly = 2; "
        f"GRANT SELECT ON {dbname or '<database>'}.* TO eval_reader; (or, on a server "
        "configured in users.xml, give the user a profile with <readonly>2</readonly>, or 1 "
        "for no table functions at all)"
    )


class ClickHouseConnection(WarehouseConnection):
    dialect = "clickhouse"

    def __init__(self, database: DatabaseConfig, url: str) -> None:
        super().__init__(database)
        try:
            from clickhouse_driver import Client, errors
        except ImportError:
            raise ConnectionFailed(
                f"{self.label}: the ClickHouse client is not installed; "
                "pip install 'eval-pipeline[clickhouse]'"
            ) from None
        self._errors = errors
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        unknown = sorted(set(options) - CLICKHOUSE_OPTIONS)
        if unknown:
            raise ConnectionFailed(
                f"{self.label}: unknown URL option(s) {', '.join(unknown)}; a clickhouse:// URL "
                f"takes {', '.join(sorted(CLICKHOUSE_OPTIONS))}"
            )
        secure = self._flag(options, "secure", False)
        self.dbname = database.schema or unquote(parts.path.lstrip("/")) or "default"
        self._kwargs: dict[str, Any] = {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or (9440 if secure else 9000),
            "user": unquote(parts.username or "default"),
            "password": unquote(parts.password or ""),
            "database": self.dbname,
            "secure": secure,
            "verify": self._flag(options, "verify", True),
            "connect_timeout": self._seconds(options, "connect_timeout", CONNECT_TIMEOUT_S),
            "send_receive_timeout": self._seconds(options, "send_receive_timeout", NETWORK_GRACE_S),
            "sync_request_timeout": CONNECT_TIMEOUT_S,
            "client_name": "eval-pipeline",
            # Columns read as NumPy arrays and Arrow buffers, not Python values.
            "settings": {"use_numpy": True},
        }
        self._client_class = Client
        self._client = Client(**self._kwargs)
        self._lock = threading.Lock()
        self._query_id: str | None = None  # the running statement's, until its end is read
        self._timeout_s = 30.0
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _flag(self, options: dict[str, str], key: str, default: bool) -> bool:
        value = options.get(key)
        if value is None:
            return default
        if value.lower() in ("true", "1", "yes"):
            return True
        if value.lower() in ("false", "0", "no"):
            return False
        raise ConnectionFailed(f"{self.label}: {key}={value!r} in the URL: expected true or false")

    def _seconds(self, options: dict[str, str], key: str, default: float) -> float:
        value = options.get(key)
        try:
            return default if value is None else float(value)
        except ValueError:
            raise ConnectionFailed(
                f"{self.label}: {key}={value!r} in the URL: expected seconds"
            ) from None

    def _setup(self) -> None:
        settings = dict(
            self._rows(
                "SELECT name, value FROM system.settings WHERE name IN ('readonly', "
                "'max_execution_time')"
            )
        )
        #: 1: reads only; 2: reads and settings; 0: anything the user's grants allow.
        self.readonly = int(settings.get("readonly", "0"))
        held = [] if self.readonly else ["readonly = 0: it may insert, alter, create and drop"]
        judge_privileges(self.database, self.label, held, clickhouse_read_only_recipe(self.dbname))

    def _rows(self, sql: str) -> list[tuple]:
        """A small catalogue query's rows, run as the session is opened."""
        try:
            return self._client.execute(sql)
        except self._errors.Error as error:
            raise self._connect_error(error) from None

    def _connect_error(self, error: Exception) -> ConnectionFailed:
        code = getattr(error, "code", None)
        if code == _UNKNOWN_DATABASE:
            return ConnectionFailed(
                f"{self.label}: database {self.dbname!r} does not exist (or this user cannot "
                "see it); fix the database in its URL or `schema:` in eval_config.yaml"
            )
        cause = _server_text(error)
        if code in _LOGIN_CODES:
            return ConnectionFailed(f"{self.label}: cannot connect: the login was refused: {cause}")
        return ConnectionFailed(f"{self.label}: cannot connect: {cause}")

    def begin_read_only(self, timeout_s: float) -> None:
        # No transactions: the user's `readonly` setting keeps every statement to reading.
        self.end()
        self._timeout_s = timeout_s

    def _settings(self) -> dict[str, Any]:
        """What each query carries, where the session may set it (see the module's note)."""
        if self.readonly == 1:
            return {}
        settings: dict[str, Any] = {
            "max_execution_time": max(1, math.ceil(self._timeout_s)),
            "timeout_overflow_mode": "throw",
            "max_block_size": BLOCK_ROWS,
        }
        if self.readonly == 0:  # allow_privileged_role: still, this query only reads
            settings["readonly"] = 2
        return settings

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        query_id = str(uuid.uuid4())
        with self._lock:
            self._query_id = query_id
        client = self._client
        try:
            with client.disconnect_on_error(sql, self._settings()):
                context = client.connection.context
                client_settings = context.client_settings
                client_settings["use_arrow"] = True  # NumPy and Arrow buffers for the columns
                context.client_settings = client_settings
                client.connection.send_query(sql, query_id=query_id)
                client.connection.send_external_tables(None)
            blocks = self._blocks(client.packet_generator(), query_id)
            schema, read = arrow_batches(blocks)
        except self._errors.Error as error:
            self._finished(query_id)
            raise self._translate(error) from None
        types = [duckdb_type_name(field.type) for field in schema]

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                yield from read
            except self._errors.Error as error:
                self._finished(query_id)
                raise self._translate(error) from None

        return Stream(list(schema.names), types, batches())

    def _blocks(self, packets: Iterator[Any], query_id: str) -> Iterator[Any]:
        header = True
        for packet in packets:
            if getattr(packet, "type", None) == _PACKET_DATA and packet.block is not None:
                if header and needs_python_values([t for _, t in packet.block.columns_with_types]):
                    # The blocks after the header are read as Python values (the driver
                    # reads the column types of each block as it comes).
                    context = self._client.connection.context
                    client_settings = context.client_settings
                    client_settings.update(use_numpy=False, use_arrow=False)
                    context.client_settings = client_settings
                header = False
                yield packet.block
        self._finished(query_id)  # the server's end of stream was read

    def _finished(self, query_id: str) -> None:
        with self._lock:
            if self._query_id == query_id:
                self._query_id = None

    def cancel(self) -> None:
        """KILL QUERY from a session of its own: the server stops the statement and says so
        (a cancel packet on the session itself would end it as an empty result)."""
        with self._lock:
            query_id = self._query_id
        if query_id is None:
            return
        with contextlib.suppress(Exception):
            killer = self._client_class(**{**self._kwargs, "settings": {}})
            try:
                killer.execute(f"KILL QUERY WHERE query_id = '{query_id}' ASYNC")
            finally:
                killer.disconnect()

    def end(self) -> None:
        with self._lock:
            running = self._query_id is not None
        if running:
            # An unread result: stop it on the server, drop the socket it was streaming on
            # (the driver opens a new one for the next query).
            self.cancel()
            self._finished(self._query_id or "")
            with contextlib.suppress(Exception):
                self._client.disconnect()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.disconnect()

    def _translate(self, error: Exception) -> WarehouseError:
        code = getattr(error, "code", None)
        if isinstance(error, self._errors.ServerException):
            if code in _TIMEOUT_CODES:
                return StatementTimeout(
                    f"{self.label}: the statement was stopped: {_server_text(error)}"
                )
            return StatementFailed(_server_text(error))
        self.broken = True
        return ConnectionFailed(f"{self.label}: lost the connection: {_server_text(error)}")


def _server_text(error: Exception) -> str:
    """The server's message without its stack trace: `Code: 60. DB::Exception: ...`."""
    text = getattr(error, "message", None) or str(error)
    text = text.split("Stack trace:", 1)[0].replace("DB::Exception: ", "")
    code = getattr(error, "code", None)
    prefix = f"Code: {code}. " if code and not text.startswith("Code:") else ""
    return short_cause(Exception(prefix + text.strip()))

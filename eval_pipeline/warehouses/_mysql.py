"""MySQL and MariaDB sessions through PyMySQL, rows turned into Arrow batches (no ADBC driver on PyPI)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._arrow import duckdb_type_name, mysql_arrow_type, rows_to_batch
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
from eval_pipeline.warehouses._mysql_rows import RowTooLarge, limit_rows, value_fixers
from eval_pipeline.warehouses._privileges import (
    judge_privileges,
    mysql_grants_held,
    mysql_read_only_recipe,
)

__all__ = ["MySqlConnection"]

#: A batch of rows read from a PyMySQL cursor ends at this many rows or bytes, whichever
#: comes first: rows are read one by one off an unbuffered cursor, so what is in memory is
#: the kept rows (`limits.query_max_bytes`), one batch and one row (bounded by the server's
#: `max_allowed_packet`).
MYSQL_BATCH_ROWS = 1_000
MYSQL_BATCH_BYTES = 1_000_000
#: The sql_mode words that change nothing in how the server splits a statement into strings,
#: identifiers, comments, operators and function calls: what the sandbox's check
#: (`sandbox._mysql_statements.server_text` and sqlglot's MySQL dialect) assumes. A session
#: keeps the server's modes among these and no other; ANSI_QUOTES, NO_BACKSLASH_ESCAPES,
#: PIPES_AS_CONCAT, IGNORE_SPACE, HIGH_NOT_PRECEDENCE, ORACLE (another grammar) and the
#: combinations that bring them (ANSI, DB2, MAXDB, MSSQL, POSTGRESQL, MYSQL323, MYSQL40),
#: and any mode this list does not know, are left out.
READING_NEUTRAL_SQL_MODES = frozenset(
    {
        "ALLOW_INVALID_DATES",
        "EMPTY_STRING_IS_NULL",
        "ERROR_FOR_DIVISION_BY_ZERO",
        "NO_AUTO_CREATE_USER",
        "NO_AUTO_VALUE_ON_ZERO",
        "NO_DIR_IN_CREATE",
        "NO_ENGINE_SUBSTITUTION",
        "NO_FIELD_OPTIONS",
        "NO_KEY_OPTIONS",
        "NO_TABLE_OPTIONS",
        "NO_UNSIGNED_SUBTRACTION",
        "NO_ZERO_DATE",
        "NO_ZERO_IN_DATE",
        "ONLY_FULL_GROUP_BY",
        "PAD_CHAR_TO_FULL_LENGTH",
        "REAL_AS_FLOAT",
        "SIMULTANEOUS_ASSIGNMENT",
        "STRICT_ALL_TABLES",
        "STRICT_TRANS_TABLES",
        "TIME_ROUND_FRACTIONAL",
        "TIME_TRUNCATE_FRACTIONAL",
        "TRADITIONAL",
    }
)
#: Seconds PyMySQL waits for the server to answer a read or take a write, past the time limit
#: of the statement being run: a stopped or vanished server fails the session instead of
#: holding it forever.
NETWORK_GRACE_S = 10
#: Bytes a row's packets hold beyond its cells' bytes: packet headers and each cell's length.
_ROW_OVERHEAD = 65_536


class MySqlConnection(WarehouseConnection):
    dialect = "mysql"

    def __init__(self, database: DatabaseConfig, url: str) -> None:
        super().__init__(database)
        import pymysql

        self._pymysql = pymysql
        parts = urlsplit(url)
        self._kwargs = {
            "host": parts.hostname or "127.0.0.1",
            "port": parts.port or 3306,
            "user": unquote(parts.username or ""),
            "password": unquote(parts.password or ""),
            "database": database.schema or unquote(parts.path.lstrip("/")) or None,
            "charset": "utf8mb4",
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT_S,
            "read_timeout": CONNECT_TIMEOUT_S + NETWORK_GRACE_S,
            "write_timeout": CONNECT_TIMEOUT_S + NETWORK_GRACE_S,
        }
        self._lock = threading.Lock()
        self._connection = self._open()
        self._cursor: Any = None
        try:
            self.is_mariadb = "mariadb" in str(self._query_one("SELECT VERSION()")).lower()
            self._check_privileges()
        except BaseException:
            self._drop()
            raise

    def _check_privileges(self) -> None:
        try:
            held, roles = mysql_grants_held(self._grants("SHOW GRANTS"))
            for role in roles:  # each role granted to the user, which it may SET ROLE to
                more, _ = mysql_grants_held(self._role_grants(role))
                held += [f"{what} (by SET ROLE {role})" for what in more]
            dbname = self._kwargs["database"] or self._query_one("SELECT DATABASE()")
        except self._pymysql.err.MySQLError as error:
            raise ConnectionFailed(f"{self.label}: {short_cause(_mysql_text(error))}") from None
        recipe = mysql_read_only_recipe(dbname)
        judge_privileges(self.database, self.label, list(dict.fromkeys(held)), recipe)

    def _role_grants(self, role: str) -> list[str]:
        """The grants of `role`, one of the user's, with those of the roles granted to it in
        turn, asked as the user itself may (`SHOW GRANTS FOR` another account wants SELECT
        on the `mysql` schema, which a read-only user lacks)."""
        if not self.is_mariadb:
            return self._grants(f"SHOW GRANTS FOR CURRENT_USER() USING {role}")
        current = self._query_one("SELECT CURRENT_ROLE()")
        with self._connection.cursor() as cursor:
            cursor.execute(f"SET ROLE {role}")
            try:
                cursor.execute("SHOW GRANTS FOR CURRENT_ROLE")
                return [row[0] for row in cursor.fetchall()]
            finally:
                # Back to the role the session started with (the user's default), if any.
                cursor.execute("SET ROLE " + (_quoted(current) if current else "NONE"))

    def _grants(self, sql: str) -> list[str]:
        with self._connection.cursor() as cursor:
            cursor.execute(sql)
            return [row[0] for row in cursor.fetchall()]

    def _open(self) -> Any:
        try:
            connection = self._pymysql.connect(**self._kwargs)
        except self._pymysql.err.MySQLError as error:
            hint = ""
            if error.args and error.args[0] == 1044:  # no privilege on the database
                hint = (
                    "; grant the user SELECT on it, or make the role that holds it the "
                    "user's default (SET DEFAULT ROLE <role> FOR <user>)"
                )
            raise ConnectionFailed(
                f"{self.label}: cannot connect: {short_cause(_mysql_text(error))}{hint}"
            ) from None
        try:
            with connection.cursor() as cursor:
                # UTC so a TIMESTAMP reads the same whatever the server's time zone.
                cursor.execute("SET time_zone = '+00:00'")
                # The whole sql_mode, spelled out: the server's own modes that leave the
                # reading of a statement alone, and no other (a combination mode such as
                # ANSI or ORACLE would bring ANSI_QUOTES back however it is removed).
                cursor.execute("SELECT @@SESSION.sql_mode")
                kept = [m for m in _modes(cursor.fetchone()[0]) if m in READING_NEUTRAL_SQL_MODES]
                cursor.execute("SET SESSION sql_mode = %s", (",".join(kept),))
            self._require_checked_reading(connection)
        except BaseException:
            with contextlib.suppress(Exception):
                connection.close()
            raise
        return connection

    def _require_checked_reading(self, connection: Any) -> None:
        """Refuse the session unless its sql_mode, read back from the server, holds only
        modes under which the server reads quotes, comments and operators as the sandbox's
        check does: a statement the check passed would otherwise be another one there."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@SESSION.sql_mode")
            other = [m for m in _modes(cursor.fetchone()[0]) if m not in READING_NEUTRAL_SQL_MODES]
        if other:
            raise ConnectionFailed(
                f"{self.label}: the session keeps sql_mode {','.join(other)}, under which the "
                "server reads quotes and comments unlike the sandbox's check, so no statement "
                "is run (it was set without them when the session opened: something between "
                "here and the server changes session variables)"
            )

    def _query_one(self, sql: str) -> Any:
        with self._connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()[0]

    def begin_read_only(self, timeout_s: float) -> None:
        self.end()
        if not self._connection.open:
            self._connection = self._open()
        # The socket waits for the statement's time limit plus a grace, then gives up.
        self._connection._read_timeout = timeout_s + NETWORK_GRACE_S
        timeout = (
            f"SET SESSION max_statement_time = {max(0.001, timeout_s):.3f}"
            if self.is_mariadb
            else f"SET SESSION max_execution_time = {max(1, int(timeout_s * 1000))}"
        )
        try:
            with self._connection.cursor() as cursor:
                cursor.execute(timeout)
                cursor.execute("START TRANSACTION READ ONLY")
            # Checked before every statement, not only when the session opened.
            self._require_checked_reading(self._connection)
        except self._pymysql.err.MySQLError as error:
            raise self._translate(error) from None
        except ConnectionFailed:
            self._drop()
            raise

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        cursor = self._connection.cursor(self._pymysql.cursors.SSCursor)
        with self._lock:
            self._cursor = cursor
        if bounds is not None:
            # A row's packets are at most its cells' bytes plus a few per cell.
            limit_rows(self._connection, bounds.row_bytes + _ROW_OVERHEAD)
        try:
            cursor.execute(sql)
        except self._pymysql.err.MySQLError as error:
            raise self._translate(error) from None
        except RowTooLarge:
            _abandon(cursor)
            self._drop()
            raise StatementFailed("the server's answer passed the byte budget") from None
        description = cursor.description or ()
        names = [d[0] for d in description]
        types = [duckdb_type_name(mysql_arrow_type(d[1], d[4], d[5])) for d in description]
        fixers = list(enumerate(value_fixers(description)))
        fixers = [(i, fix) for i, fix in fixers if fix is not None]

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                rows: list[tuple] = []
                size = 0
                while (row := cursor.fetchone()) is not None:
                    if fixers:
                        values = list(row)
                        for i, fix in fixers:
                            values[i] = fix(values[i])
                        row = tuple(values)
                    rows.append(row)
                    size += sum(_size(value) for value in row)
                    if len(rows) >= MYSQL_BATCH_ROWS or size >= MYSQL_BATCH_BYTES:
                        yield rows_to_batch(names, rows)
                        rows, size = [], 0
                if rows:
                    yield rows_to_batch(names, rows)
            except self._pymysql.err.MySQLError as error:
                raise self._translate(error) from None
            except RowTooLarge:
                # Left in the middle of a row, the session cannot go on: it is closed (and
                # its result never drained), and the rows before are the result.
                _abandon(cursor)
                self._drop()
                if rows:
                    yield rows_to_batch(names, rows)
                stream.refused_row = True

        stream = Stream(names, types, batches() if description else iter(()))
        return stream

    def cancel(self) -> None:
        if self.broken:
            return  # the server is gone or frozen: a second session would only wait too
        # KILL QUERY from a second session: the server stops the statement itself.
        thread_id = self._connection.thread_id()
        with contextlib.suppress(Exception):
            killer = self._pymysql.connect(**{**self._kwargs, "database": None})
            try:
                with killer.cursor() as cursor:
                    cursor.execute(f"KILL QUERY {int(thread_id)}")
            finally:
                killer.close()

    def end(self) -> None:
        with self._lock:
            cursor, self._cursor = self._cursor, None
        result = getattr(cursor, "_result", None)
        if result is not None and result.unbuffered_active and not self.broken:
            # An unread streamed result must be read to its end before the session is
            # usable; stop it on the server instead, then drop the session if it is broken.
            self.cancel()
            try:
                cursor.close()
            except Exception:
                self._drop()
                return
        try:
            with self._connection.cursor() as plain:
                plain.execute("ROLLBACK")
        except Exception:
            self._drop()

    def _drop(self) -> None:
        self.broken = True
        with contextlib.suppress(Exception):
            self._connection.close()

    def close(self) -> None:
        self._drop()

    def _translate(self, error: Exception) -> WarehouseError:
        code = error.args[0] if error.args else None
        # 2003/2006/2013/2055: cannot connect, gone away, lost during query, lost at handshake.
        if code in (2003, 2006, 2013, 2055) or isinstance(error, self._pymysql.err.InterfaceError):
            self.broken = True
            return ConnectionFailed(f"{self.label}: lost the connection: {_mysql_text(error)}")
        # 1969: MariaDB max_statement_time; 3024: MySQL max_execution_time; 1317: KILL QUERY.
        if code in (1969, 3024, 1317):
            return StatementTimeout(
                f"{self.label}: the statement was stopped: {_mysql_text(error)}"
            )
        return StatementFailed(short_cause(_mysql_text(error)))


def _modes(sql_mode: str | bytes | None) -> list[str]:
    """The words of an `@@sql_mode` value."""
    text = sql_mode.decode() if isinstance(sql_mode, bytes) else sql_mode or ""
    return [word.strip().upper() for word in text.split(",") if word.strip()]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _abandon(cursor: Any) -> None:
    """Mark PyMySQL's unread result as done, so nothing reads the rest of it off a session
    that is being dropped (its cleanup would, even once the socket is closed)."""
    result = getattr(cursor, "_result", None)
    if result is not None:
        result.unbuffered_active = False


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes | bytearray) else 8


def _mysql_text(error: Exception) -> str:
    args = getattr(error, "args", ())
    return f"({args[0]}) {args[1]}" if len(args) >= 2 else str(error)

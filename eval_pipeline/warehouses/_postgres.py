"""PostgreSQL sessions through ADBC (`adbc-driver-postgresql`): binary COPY straight into Arrow."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig
from eval_pipeline.warehouses._arrow import duckdb_type_name, normalise_postgres
from eval_pipeline.warehouses._connection import (
    CONNECT_TIMEOUT_S,
    CellBounds,
    StableCallables,
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
from eval_pipeline.warehouses._postgres_cells import bounded_statement
from eval_pipeline.warehouses._privileges import (
    judge_privileges,
    postgres_privileges_sql,
    postgres_read_only_recipe,
)

__all__ = ["PostgresConnection"]


class PostgresConnection(WarehouseConnection):
    dialect = "postgres"

    def __init__(self, database: DatabaseConfig, url: str) -> None:
        super().__init__(database)
        import adbc_driver_manager
        import adbc_driver_postgresql.dbapi as adbc

        self._errors = adbc_driver_manager.Error
        rest = url.split("://", 1)[1]
        url = "postgresql://" + rest  # postgres:// and postgresql+driver:// name the same thing
        for key, value in _NETWORK_DEADLINES.items():
            if f"{key}=" not in url:
                url += ("&" if "?" in url else "?") + f"{key}={value}"
        try:
            self._connection = adbc.connect(url)
        except self._errors as error:
            raise ConnectionFailed(f"{self.label}: cannot connect: {short_cause(error)}") from None
        self._cursor = self._connection.cursor()
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        schema = self.database.schema
        if schema is not None:
            found = self._scalar(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = "
                + _literal(schema)
            )
            if not found:
                raise ConnectionFailed(
                    f"{self.label}: schema {schema!r} does not exist (or this user cannot see "
                    "it); fix `schema:` in eval_config.yaml"
                )
        version = int(self._scalar("SELECT current_setting('server_version_num')"))
        held = list(self._scalar(postgres_privileges_sql(version)) or [])
        recipe = postgres_read_only_recipe(self._scalar("SELECT current_database()"), schema)
        judge_privileges(self.database, self.label, held, recipe)
        self.stable = StableCallables(
            functions=self._all_stable(_FUNCTIONS_SQL), operators=self._all_stable(_OPERATORS_SQL)
        )
        # UTC so a TIMESTAMPTZ reads the same whatever the server's or role's time zone.
        self._cursor.execute("SET TIME ZONE 'UTC'")
        # Strings read as sqlglot's PostgreSQL dialect reads them (backslash is no escape).
        self._cursor.execute("SET standard_conforming_strings = on")
        if schema is not None:
            self._cursor.execute(f"SET search_path TO {_identifier(schema)}")
        self._connection.commit()

    def _all_stable(self, sql: str) -> frozenset[str]:
        """Names (bare and schema-qualified) of `sql`'s rows (schema, name, every overload
        callable) whose every overload is, in every schema for the bare name."""
        try:
            self._cursor.execute(sql)
            rows = self._cursor.fetchall()
            self._connection.rollback()
        except self._errors as error:
            raise ConnectionFailed(f"{self.label}: {short_cause(error)}") from None
        stable: dict[str, bool] = {}
        for schema, name, all_stable in rows:
            stable[f"{schema}.{name}"] = all_stable
            stable[name] = stable.get(name, True) and all_stable
        return frozenset(name for name, ok in stable.items() if ok)

    def _scalar(self, sql: str) -> Any:
        return self._row(sql)[0]

    def _row(self, sql: str) -> tuple:
        try:
            self._cursor.execute(sql)
            row = self._cursor.fetchone()
            self._connection.rollback()
            return row
        except self._errors as error:
            raise ConnectionFailed(f"{self.label}: {short_cause(error)}") from None

    def begin_read_only(self, timeout_s: float) -> None:
        self.end()
        try:
            # The driver opens the transaction itself (autocommit is off); these come first.
            self._cursor.execute("SET TRANSACTION READ ONLY")
            self._cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
        except self._errors as error:
            raise self._translate(error) from None

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        try:
            # The driver wraps a query in COPY (...) TO STDOUT, which takes no EXPLAIN or SHOW:
            # those are read over the ordinary protocol (small results, so the speed is moot,
            # and bounded by the statement's own size: a plan or a setting, not table data).
            plain = _leading_word(sql) in _NOT_COPYABLE
            self._cursor.adbc_statement.set_options(**{_USE_COPY: "false" if plain else "true"})
            bounded = None
            if bounds is not None and not plain:
                # The server describes the result first (no row is produced), so it can be
                # asked to cut what the bounds do not allow.
                described = self._cursor.adbc_execute_schema(sql)
                bounded = bounded_statement(sql, described, bounds)
            self._cursor.execute(bounded or sql)
            reader = self._cursor.fetch_record_batch()
        except self._errors as error:
            raise self._translate(error) from None
        schema = reader.schema
        empty = normalise_postgres(pa.RecordBatch.from_pylist([], schema=schema))
        types = [duckdb_type_name(field.type) for field in empty.schema]
        names = list(schema.names)
        if bounded:
            names, types = names[:-2], types[:-2]  # SERVER_TEXT and SERVER_SIZE

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                for batch in reader:
                    yield normalise_postgres(batch)
            # An error while the COPY streams surfaces through Arrow's reader as an OSError.
            except (self._errors, OSError, pa.ArrowException) as error:
                raise self._translate(error) from None

        return Stream(names, types, batches(), server_cells=bounded is not None)

    def cancel(self) -> None:
        with contextlib.suppress(Exception):
            self._cursor.adbc_cancel()

    def _translate(self, error: Exception) -> WarehouseError:
        text = str(error)
        if any(marker in text for marker in _PG_LOST):
            self.broken = True
            return ConnectionFailed(f"{self.label}: lost the connection: {short_cause(error)}")
        if "57014" in text or "statement timeout" in text:  # query_canceled
            return StatementTimeout(
                f"{self.label}: the statement was stopped: {short_cause(error)}"
            )
        return StatementFailed(short_cause(error))

    def end(self) -> None:
        try:
            self._connection.rollback()
        except self._errors:
            # An unread COPY stream blocks the rollback: stop it on the server first.
            self.cancel()
            try:
                self._connection.rollback()
            except self._errors:
                self.broken = True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._cursor.close()
        with contextlib.suppress(Exception):
            self._connection.close()


#: libpq's network deadlines: a silent host fails the connect after CONNECT_TIMEOUT_S, and a
#: peer that stops answering (its host gone, a cable cut) ends the session after about 30 s
#: of unacknowledged data or keepalive probes. A server process that is stopped but whose
#: host still acknowledges is caught by the sandbox's own deadline instead.
_NETWORK_DEADLINES = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 4,
    "tcp_user_timeout": 30_000,
}

#: What libpq says when the session is gone (SQLSTATE class 08, or the server shut down).
_PG_LOST = (
    "server closed the connection",
    "no connection to the server",
    "terminating connection",
    "connection to server",
    "SQLSTATE: 08",
    "SQLSTATE: 57P0",
)


#: Whether the agent's SQL may call a function: the server marks it immutable or stable and,
#: if it came with the server (an oid below 16384, FirstNormalObjectId), not PARALLEL UNSAFE,
#: the server's mark for a function that changes the transaction's or the session's state
#: though stable (`txid_current()` assigns a transaction id; `current_schema()` and
#: `current_schemas()` are marked so too, the keyword `current_schema` is not a call). A
#: warehouse's own functions are PARALLEL UNSAFE unless their author says otherwise, so for
#: them volatility alone decides.
_CALLABLE = "p.provolatile IN ('i', 's') AND (p.proparallel <> 'u' OR p.oid >= 16384)"
_FUNCTIONS_SQL = (
    f"SELECT n.nspname, p.proname, bool_and({_CALLABLE}) "
    "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace GROUP BY 1, 2"
)
_OPERATORS_SQL = (
    f"SELECT n.nspname, o.oprname, bool_and({_CALLABLE}) "
    "FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace "
    "JOIN pg_proc p ON p.oid = o.oprcode GROUP BY 1, 2"
)
_USE_COPY = "adbc.postgresql.use_copy"
_NOT_COPYABLE = frozenset({"EXPLAIN", "SHOW"})
_LEADING_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(\w+)", re.DOTALL)


def _leading_word(sql: str) -> str:
    """The statement's first word, past white space and comments (upper case)."""
    match = _LEADING_WORD.match(sql)
    return match.group(1).upper() if match else ""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

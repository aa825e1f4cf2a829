"""A throwaway ClickHouse server for tests: Debian's clickhouse-server (18.16), a temp folder, a free port, the small warehouse.

Debian's package is ClickHouse 18.16 (2018): no SQL users or grants (users and their
`readonly` profiles live in users.xml), no DateTime64, Map, Int128 or Bool types, and
LowCardinality behind a setting. The server runs as `nobody` under root, on 127.0.0.1.
Its users: `evaluser` (profile without `readonly`: it may write, and loads the tables),
`eval_reader` (`readonly = 2`, what the docs' recipe makes) and `eval_strict`
(`readonly = 1`: no settings, no table functions).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

from eval_pipeline.suite import DatabaseConfig, Templated
from eval_pipeline_tests.warehouses.servers import (
    _as_service_user,
    _service_folder,
    _stop,
    _wait_for_port,
    free_port,
)
from eval_pipeline_tests.warehouses.small_warehouse import CUSTOMERS, ORDERS

CLICKHOUSE_SERVER = shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"
#: A read the sandbox allows that keeps the server busy until stopped (CPU only): the
#: numbers table never ends.
SLOW_QUERY = "SELECT sum(number) AS s FROM system.numbers"
#: The small warehouse in ClickHouse's types: MergeTree tables, Nullable where NULL is held,
#: DateTime('UTC') for a timestamp with zone, UInt8 for a boolean (18.16 has no Bool), and
#: a comment on each id column (18.16 keeps none for a table).
_TABLES = {
    "customers": (
        "id Int32 COMMENT 'customer id', name String, signup_date Date, is_vip UInt8, "
        "credit_limit Nullable(Decimal(12, 2))"
    ),
    "orders": (
        "id Int32 COMMENT 'order id', customer_id Int32, ordered_at DateTime, "
        "paid_at Nullable(DateTime('UTC')), amount Decimal(12, 2), status Nullable(String)"
    ),
}


@dataclass(frozen=True)
class ClickHouseServer:
    """A running ClickHouse and the user tests connect as."""

    host: str
    port: int
    user: str
    password: str
    dbname: str
    folder: Path
    passwords: dict
    pid: int = 0

    @property
    def url(self) -> str:
        return f"clickhouse://{self.user}:{self.password}@{self.host}:{self.port}/{self.dbname}"

    def as_user(self, user: str) -> ClickHouseServer:
        return replace(self, user=user, password=self.passwords[user])

    @property
    def owner(self) -> ClickHouseServer:
        return self.as_user("evaluser")

    def client(self, user: str = "evaluser", database: str = "shop"):  # -> clickhouse_driver.Client
        from clickhouse_driver import Client

        password = self.passwords[user]
        return Client(self.host, port=self.port, user=user, password=password, database=database)

    def database(self, name: str = "shop", **options) -> DatabaseConfig:
        """The `databases:` entry a suite would write for this server."""
        url = Templated(self.url, secret="url_password")
        return DatabaseConfig(name, "clickhouse", url=url, **options)


def clickhouse_missing() -> str | None:
    """Why a ClickHouse server cannot be started here, or None."""
    if not Path(CLICKHOUSE_SERVER).exists():
        return "ClickHouse is not installed (clickhouse-server); apt-get install clickhouse-server"
    try:
        import clickhouse_driver  # noqa: F401
    except ImportError:
        return "clickhouse-driver is not installed: pip install 'eval-pipeline[clickhouse]'"
    return None


_CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{folder}/server.log</log>
    <errorlog>{folder}/server.err.log</errorlog></logger>
  <tcp_port>{port}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{folder}/data/</path>
  <tmp_path>{folder}/tmp/</tmp_path>
  <user_files_path>{folder}/user_files/</user_files_path>
  <format_schema_path>{folder}/format_schemas/</format_schema_path>
  <users_config>{folder}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>104857600</mark_cache_size>
  <max_concurrent_queries>20</max_concurrent_queries>
</yandex>
"""
_USERS = """<?xml version="1.0"?>
<yandex>
  <profiles>
    <default><max_memory_usage>2000000000</max_memory_usage></default>
    <reader><readonly>2</readonly><max_memory_usage>2000000000</max_memory_usage></reader>
    <strict><readonly>1</readonly><max_memory_usage>2000000000</max_memory_usage></strict>
  </profiles>
  <users>
{users}
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
"""
_PROFILES = {"evaluser": "default", "eval_reader": "reader", "eval_strict": "strict"}


@contextlib.contextmanager
def clickhouse_server() -> Iterator[ClickHouseServer]:
    """A ClickHouse holding the small warehouse in its `shop` database, seen as `eval_reader`
    (readonly = 2); stopped on exit."""
    with _service_folder("eval-clickhouse-") as folder:
        port = free_port()
        passwords = {user: "ch-" + secrets.token_hex(10) for user in _PROFILES}
        users = "\n".join(
            f"    <{user}><password>{passwords[user]}</password><networks><ip>127.0.0.1</ip>"
            f"</networks><profile>{profile}</profile><quota>default</quota></{user}>"
            for user, profile in _PROFILES.items()
        )
        (folder / "config.xml").write_text(_CONFIG.format(folder=folder, port=port))
        (folder / "users.xml").write_text(_USERS.format(users=users))
        log = folder / "server.err.log"
        process = subprocess.Popen(
            [CLICKHOUSE_SERVER, f"--config-file={folder / 'config.xml'}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=folder,
            **_as_service_user(),
        )
        try:
            _wait_for_port(port, process, log)
            server = ClickHouseServer(
                "127.0.0.1", port, "eval_reader", passwords["eval_reader"], "shop", folder,
                passwords, pid=process.pid,
            )  # fmt: skip
            _load(server)
            yield server
        finally:
            _stop(process)


def _load(server: ClickHouseServer) -> None:
    client = server.client(database="default")
    client.execute("CREATE DATABASE shop")
    for table, columns in _TABLES.items():
        client.execute(f"CREATE TABLE shop.{table} ({columns}) ENGINE = MergeTree ORDER BY id")
    client.execute("INSERT INTO shop.customers VALUES", [_customer(row) for row in CUSTOMERS])
    client.execute("INSERT INTO shop.orders VALUES", [_order(row) for row in ORDERS])
    client.disconnect()


def _customer(row: tuple) -> tuple:
    id_, name, signup, vip, limit = row
    return (id_, name, signup, int(vip), limit)


def _order(row: tuple) -> tuple:
    id_, customer, ordered, paid, amount, status = row
    utc = paid.replace(tzinfo=dt.UTC) if paid is not None else None
    return (id_, customer, ordered, utc, Decimal(amount), status)

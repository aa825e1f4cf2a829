"""Real warehouses for the tests: the small warehouse in DuckDB, PostgreSQL 15 and MariaDB.

Each server starts once per session in a temp folder on a free port (see `servers.py`) and
is stopped at the end; without its binaries the tests that need it are skipped, saying which
package to install.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.suite import DatabaseConfig, Templated
from eval_pipeline_tests.warehouses.servers import (
    Server,
    mariadb_missing,
    mariadb_server,
    mysql_connection,
    read_only_role,
)
from eval_pipeline_tests.warehouses.small_warehouse import (
    load_statements,
)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[Server]:
    """A MariaDB holding the small warehouse in its `shop` database, seen through a read-only
    user (its `owner` has every privilege)."""
    if reason := mariadb_missing():
        pytest.skip(reason)
    with mariadb_server() as server:
        connection = mysql_connection(server)
        with connection.cursor() as cursor:
            for statement in load_statements("mysql"):
                cursor.execute(statement)
        connection.close()
        yield read_only_role(server)


@pytest.fixture(scope="session")
def duckdb_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small warehouse as a DuckDB file."""
    path = tmp_path_factory.mktemp("duckdb") / "small.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in load_statements("duckdb"):
            connection.execute(statement)
    return path


def database_of(server_or_path: Server | Path, name: str = "shop", **options) -> DatabaseConfig:
    """The `databases:` entry a suite would write for a test server or a DuckDB file."""
    if isinstance(server_or_path, Path):
        return DatabaseConfig(name, "duckdb", path=server_or_path, **options)
    url = Templated(server_or_path.url, secret="url_password")
    return DatabaseConfig(name, server_or_path.kind, url=url, **options)


@pytest.fixture(
    params=[
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.slow),  # starts a server
        pytest.param("mariadb", marks=pytest.mark.slow),
    ]
)
def small_database(request: pytest.FixtureRequest) -> DatabaseConfig:
    """The small warehouse on each engine in turn."""
    source = request.getfixturevalue(
        {"duckdb": "duckdb_warehouse", "postgres": "postgres", "mariadb": "mariadb"}[request.param]
    )
    return database_of(source, name=f"small_{request.param}")

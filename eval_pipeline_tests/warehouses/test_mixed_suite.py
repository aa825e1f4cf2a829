"""A suite mixing a DuckDB file and a PostgreSQL server: each test's reference runs on its database."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from eval_pipeline.pipeline import references_by_database
from eval_pipeline.sandbox import SandboxLimits
from eval_pipeline.suite import load_suite
from eval_pipeline.warehouses import ConnectionFailed


def _suite(tmp_path, duckdb_warehouse, url_variable="SHOP_PG_URL"):
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    shutil.copy(duckdb_warehouse, root / "local.duckdb")
    (root / "eval_config.yaml").write_text(
        textwrap.dedent(f"""\
            databases:
              - {{name: local, type: duckdb, path: local.duckdb}}
              - {{name: finance, type: postgres, url: "{{{{ env('{url_variable}') }}}}"}}
            """)
    )
    # The same question on both: only the server copy has the extra order inserted below.
    (root / "cases" / "local_count.yml").write_text(
        "prompt: How many orders?\nsql: SELECT count(*) AS n FROM orders\n"
    )
    (root / "cases" / "server_count.yml").write_text(
        "prompt: How many orders?\nsql: SELECT count(*) AS n FROM orders\ndatabase: finance\n"
    )
    (root / "cases" / "server_version.yml").write_text(
        "prompt: Which server?\nsql: SELECT left(version(), 10) AS v\ndatabase: finance\n"
    )
    return root


def test_each_reference_runs_on_the_database_its_test_names(
    tmp_path, duckdb_warehouse, postgres, monkeypatch
):
    monkeypatch.setenv("SHOP_PG_URL", postgres.url)
    import psycopg

    with psycopg.connect(postgres.owner.url, autocommit=True) as connection:
        connection.execute("CREATE TABLE orders_backup AS SELECT * FROM orders")
        connection.execute("INSERT INTO orders (id, customer_id, amount) VALUES (99, 1, 1.00)")
    try:
        suite = load_suite(_suite(tmp_path, duckdb_warehouse))
        results = references_by_database(suite.config, suite.cases, SandboxLimits())
    finally:
        with psycopg.connect(postgres.owner.url, autocommit=True) as connection:
            connection.execute("DELETE FROM orders WHERE id = 99")
            connection.execute("DROP TABLE orders_backup")
    by_name = {r.name: r for r in results}
    assert [r.name for r in results] == ["local_count", "server_count", "server_version"]
    assert [r.database for r in results] == ["local", "finance", "finance"]
    # Which server answered is part of the data version; its password is not.
    finance = suite.config.database("finance")
    monkeypatch.setenv("SHOP_PG_URL", postgres.url.replace(postgres.password, "rotated-pw"))
    assert finance.fingerprint == suite.config.database("finance").fingerprint
    assert by_name["local_count"].rows == [[5]] and by_name["local_count"].error is None
    assert by_name["server_count"].rows == [[6]]
    assert by_name["server_version"].rows == [["PostgreSQL"]]


def test_a_wrong_server_password_stops_references_naming_the_database(
    tmp_path, duckdb_warehouse, postgres, monkeypatch
):
    monkeypatch.setenv("SHOP_PG_URL", postgres.url.replace(postgres.password, "Not-The-Password"))
    suite = load_suite(_suite(tmp_path, duckdb_warehouse))
    with pytest.raises(ConnectionFailed) as error:
        references_by_database(suite.config, suite.cases, SandboxLimits())
    assert "database 'finance' (postgres): cannot connect" in str(error.value)
    assert "password authentication failed" in str(error.value)
    assert "Not-The-Password" not in str(error.value)


def test_a_nao_project_naming_a_postgres_database_runs_its_references_there(
    tmp_path, duckdb_warehouse, postgres, monkeypatch
):
    """nao's own fields (host, port, database, user, password from the environment)."""
    project = tmp_path / "nao"
    (project / "tests").mkdir(parents=True)
    shutil.copy(duckdb_warehouse, project / "local.duckdb")
    (project / "nao_config.yaml").write_text(
        textwrap.dedent(f"""\
            project_name: shop
            databases:
              - name: local
                type: duckdb
                path: local.duckdb
              - name: finance
                type: postgres
                host: {postgres.host}
                port: {postgres.port}
                database: {postgres.dbname}
                user: {postgres.user}
                password: {{{{ env('NAO_PG_PASSWORD') }}}}
            """)
    )
    (project / "tests" / "server_version.yml").write_text(
        "name: server_version\nprompt: Which server?\n"
        "sql: SELECT left(version(), 10) AS v\ndatabase: finance\n"
    )
    monkeypatch.setenv("NAO_PG_PASSWORD", postgres.password)
    suite = load_suite(project)
    (result,) = references_by_database(suite.config, suite.cases, SandboxLimits())
    assert result.error is None and result.rows == [["PostgreSQL"]]


def test_references_name_their_database_and_its_definition_moves_the_data_version(
    tmp_path, duckdb_warehouse
):
    """Two DuckDB copies with the same rows: the answer is the same, the database is not."""
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    for name in ("a.duckdb", "b.duckdb"):
        shutil.copy(duckdb_warehouse, root / name)
    config = root / "eval_config.yaml"
    config.write_text("databases:\n  - {name: shop, type: duckdb, path: a.duckdb}\n")
    (root / "cases" / "count.yml").write_text(
        "prompt: How many?\nsql: SELECT count(*) FROM orders\n"
    )

    def reference():
        suite = load_suite(root)
        (result,) = references_by_database(suite.config, suite.cases, SandboxLimits())
        return result

    first = reference()
    assert first.database == "shop" and first.to_row()["database"] == "shop"
    assert reference().data_version == first.data_version  # nothing changed: same version
    config.write_text("databases:\n  - {name: shop, type: duckdb, path: b.duckdb}\n")
    moved = reference()
    assert moved.rows == first.rows and moved.result_hash == first.result_hash
    assert moved.data_version != first.data_version  # another file answered
    config.write_text("databases:\n  - {name: copy, type: duckdb, path: b.duckdb}\n")
    renamed = reference()
    assert renamed.database == "copy" and renamed.data_version != moved.data_version

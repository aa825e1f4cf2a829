"""The `databases:` list of eval_config.yaml, and the `database:` a test picks from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.suite import SuiteError, forget_secrets, load_suite, redact

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
CASE = "prompt: How many orders?\nsql: SELECT count(*) AS n FROM orders\n"
DATABASES = """\
databases:
  - name: shop
    type: duckdb
    path: warehouse.duckdb
  - name: finance
    type: postgres
    url: "{{ env('FINANCE_PG_URL') }}"
    schema: analytics
  - {name: crm, type: mysql, url: "mysql://reader:{{ env('CRM_PASSWORD') }}@db.internal:3306/crm"}
"""


@pytest.fixture(autouse=True)
def _no_secrets_between_tests():
    yield
    forget_secrets()


def test_databases_are_read_in_order_and_the_first_is_the_default(make_suite, monkeypatch):
    root = make_suite({"orders.yml": CASE}, DATABASES)
    monkeypatch.delenv("FINANCE_PG_URL", raising=False)
    config = load_suite(root).config  # an unset variable is no load error: resolved on use
    assert [d.name for d in config.databases] == ["shop", "finance", "crm"]
    assert config.database().name == "shop" and config.database("crm").type == "mysql"
    assert config.database("finance").schema == "analytics"
    assert config.warehouse is not None and config.warehouse.path == root / "warehouse.duckdb"
    assert config.database("shop").path == root / "warehouse.duckdb"
    url = "postgresql://reader:s3cret-pass-word@pg.internal:5432/finance"
    monkeypatch.setenv("FINANCE_PG_URL", url)
    assert config.database("finance").resolve_url() == url


def test_only_the_password_of_a_database_url_becomes_a_secret(make_suite, monkeypatch):
    monkeypatch.setenv("FINANCE_PG_URL", "postgresql://reader:s3cret-pass-word@pg.internal/fin")
    monkeypatch.setenv("CRM_PASSWORD", "crm-password-123")
    load_suite(make_suite({"orders.yml": CASE}, DATABASES))  # registers what it will need
    message = redact(
        "cannot connect to postgresql://reader:s3cret-pass-word@pg.internal/fin "
        "or mysql://reader:crm-password-123@db.internal:3306/crm"
    )
    assert "s3cret" not in message and "crm-password" not in message
    assert "postgresql://reader:" in message and "@pg.internal/fin" in message


def test_a_single_warehouse_is_one_database_named_warehouse(make_suite):
    root = make_suite(
        {"orders.yml": CASE + "database: warehouse\n"},
        "warehouse: {type: duckdb, path: shop.duckdb}\n",
    )
    config = load_suite(root).config
    assert [(d.name, d.type, d.path) for d in config.databases] == [
        ("warehouse", "duckdb", root / "shop.duckdb")
    ]


def test_allow_privileged_role_is_read_and_off_by_default(make_suite):
    root = make_suite(
        {"orders.yml": CASE},
        "databases:\n"
        "  - {name: a, type: postgres, url: 'postgresql://u@h/d', allow_privileged_role: true}\n"
        "  - {name: b, type: mysql, url: 'mysql://u@h/d'}\n",
    )
    databases = load_suite(root).config.databases
    assert [d.allow_privileged_role for d in databases] == [True, False]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "databases:\n  - {name: a, type: oracle, url: x}\n",
            "eval_config.yaml:2: databases[0].type: expected 'duckdb', 'postgres', 'mysql' (MySQL and MariaDB), 'snowflake', 'clickhouse' or 'bigquery'",
        ),
        (
            "databases:\n  - {name: a, type: postgres, url: 'mysql://u@h/d'}\n",
            "eval_config.yaml:2: databases[0].url: a postgres url starts with postgresql://",
        ),
        (
            "databases:\n  - {name: a, type: duckdb, path: a.duckdb}\n"
            "  - {name: a, type: duckdb, path: b.duckdb}\n",
            "eval_config.yaml:3: databases[1].name: database name 'a' is already used",
        ),
        (
            "warehouse: {type: duckdb, path: w.duckdb}\n"
            "databases:\n  - {name: a, type: duckdb, path: a.duckdb}\n",
            "eval_config.yaml:1: warehouse: give either `warehouse:` (one database) or "
            "`databases:`",
        ),
        (
            "databases:\n  - {name: a, type: postgres}\n",
            "databases[0].url: is required",
        ),
        (
            "databases:\n  - {name: a, type: postgres, url: 'postgresql://u@h/d', "
            "allow_privileged_role: 'yes'}\n",
            "eval_config.yaml:2: databases[0].allow_privileged_role: expected true or false",
        ),
        (
            "databases:\n  - {name: a, type: duckdb, path: a.duckdb, allow_privileged_role: true}\n",
            "databases[0].allow_privileged_role: only a server database (postgres, mysql, snowflake, clickhouse, bigquery)",
        ),
    ],
)
def test_a_bad_databases_entry_is_named_with_its_line(make_suite, config, expected):
    root = make_suite({"orders.yml": CASE}, config)
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    assert expected in str(error.value)


@pytest.mark.slow  # the `eval-pipeline` command in a subprocess
def test_cli_refuses_a_test_naming_an_unknown_database_with_file_line_and_names(make_suite):
    root = make_suite({"sales/orders.yml": CASE + "database: warehose\n"}, DATABASES)
    result = subprocess.run(
        [str(SCRIPT), "list", "--suite", str(root)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stdout
    assert (
        "cases/sales/orders.yml:3: database: no database named 'warehose' is configured; "
        "configured: shop, finance, crm" in result.stderr
    )
    assert "Traceback" not in result.stderr

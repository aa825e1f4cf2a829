"""ClickHouse's statement rules and nao's ClickHouse fields, without a server: what is sent, what is refused, which URL is built."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from eval_pipeline.sandbox import ForbiddenStatement, QueryFailed
from eval_pipeline.sandbox._clickhouse_engine import nao_url  # the unit itself: nao's fields
from eval_pipeline.sandbox._clickhouse_statements import (  # the unit itself: the rules alone
    require_clickhouse_reading_statement,
)
from eval_pipeline.suite import load_suite


@pytest.mark.parametrize(
    ("sql", "sent"),
    [
        ("SELECT 1 -- a comment\n", "SELECT 1  \n"),
        ("SELECT /* why */ a FROM t", "SELECT   a FROM t"),
        ("SELECT '-- not a comment', 'it''s', 'a\\'b' AS \"x -- y\"", None),
        ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", None),
        ("SELECT number FROM numbers(3)", None),
        ("SELECT 1 FROM t WHERE id IN numbers(3) AND id IN (1, 2) AND id IN u", None),
        ("SELECT a, arrayJoin(arr) FROM t ARRAY JOIN arr AS a", None),
        ("SELECT count() FROM t FINAL WHERE toDate(ts) = today()", None),
        ("SELECT 1 UNION ALL SELECT 2", None),
        ("DESCRIBE TABLE orders", None),
        ("SELECT `settings`, 'SETTINGS' FROM t", None),  # a quoted name, a string
    ],
)
def test_reads_pass_and_the_server_is_sent_them_without_comments(sql, sent):
    assert require_clickhouse_reading_statement(sql) == (sent or sql)


@pytest.mark.parametrize(
    ("sql", "refusal"),
    [
        ("SELECT 1 SETTINGS readonly = 0", "SETTINGS is not allowed"),
        ("SELECT * FROM s3('https://bucket/x.csv')", "s3() is not allowed"),
        ("SELECT * FROM t JOIN jdbc('x', 'y') AS j ON 1", "jdbc() is not allowed"),
        ("SELECT * FROM input('a Int8')", "input() is not allowed"),
        (
            "SELECT * FROM clusterAllReplicas('c', system.one)",
            "clusterAllReplicas() is not allowed",
        ),
        ("SELECT 1 FROM t WHERE id GLOBAL IN remoteSecure('h', d.t)", "remoteSecure() is not"),
        ("SELECT 1 FROM t WHERE id IN (SELECT a FROM hdfs('hdfs://h/x', CSV, 'a Int8'))", "hdfs()"),
        ("SELECT file('/etc/passwd')", "file is not allowed"),
        ("SELECT sleep(3)", "sleep is not allowed"),
        ("ATTACH TABLE x", "ATTACH is not allowed"),
        ("TRUNCATE TABLE orders", "TRUNCATE is not allowed"),
        ("EXPLAIN SELECT 1", "EXPLAIN is not allowed"),
        ("WATCH live_view", "WATCH is not allowed"),
        ("SELECT 1\u3000FROM t", "U+3000"),
        ("", "The query is empty"),
    ],
)
def test_what_reaches_outside_or_writes_is_refused(sql, refusal):
    with pytest.raises(ForbiddenStatement) as refused:
        require_clickhouse_reading_statement(sql)
    assert refusal in refused.value.message


def test_a_string_that_never_ends_is_a_syntax_error_for_the_model():
    with pytest.raises(QueryFailed, match="never closed"):
        require_clickhouse_reading_statement("SELECT 'abc")


@pytest.mark.parametrize(
    ("fields", "url"),
    [
        (
            {"host": "ch.internal", "database": "shop", "user": "reader", "password": "p%40ss"},
            "clickhouse://reader:p%40ss@ch.internal:9000/shop",
        ),
        (
            {"host": "h", "database": "d", "user": "u", "secure": "true"},
            "clickhouse://u@h:9440/d?secure=true",
        ),
        (  # nao's default protocol on ClickHouse's HTTPS port: the same server's native one
            {"host": "h", "database": "d", "user": "u", "port": "8443", "secure": "True"},
            "clickhouse://u@h:9440/d?secure=true",
        ),
        (
            {"host": "h", "database": "d", "user": "u", "port": "19000", "protocol": "native",
             "verify": "false", "connect_timeout": "5"},
            "clickhouse://u@h:19000/d?verify=false&connect_timeout=5",
        ),
    ],
)  # fmt: skip
def test_naos_fields_become_a_native_url(fields, url):
    assert nao_url(fields) == url


def test_a_nao_database_on_another_http_port_is_refused_with_its_line(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.yml").write_text("name: t\nprompt: p\nsql: SELECT 1\n")
    (tmp_path / "nao_config.yaml").write_text(
        textwrap.dedent("""\
            project_name: shop
            databases:
              - name: shop
                type: clickhouse
                host: ch.internal
                port: 8124
                database: shop
                user: reader
                password: "{{ env('CH_PASSWORD') }}"
                secure: true
            """)
    )
    with pytest.raises(Exception) as refused:
        load_suite(tmp_path)
    text = str(refused.value) + " ".join(p.message for p in getattr(refused.value, "problems", []))
    assert "protocol http on port 8124" in text and "protocol: native" in text


def test_only_the_engines_own_modules_name_it():
    """One engine, one adapter: beside its modules, only the registry's line and the
    warehouses package's face (which exports its session class) name ClickHouse."""
    product = Path(__file__).resolve().parents[2] / "eval_pipeline"
    naming = {
        path.relative_to(product).as_posix()
        for path in product.rglob("*.py")
        if "clickhouse" in path.read_text(encoding="utf-8").lower()
    }
    assert naming == {
        "sandbox/_clickhouse_engine.py",
        "sandbox/_clickhouse_statements.py",
        "suite/_engines.py",
        "warehouses/__init__.py",
        "warehouses/_clickhouse.py",
        "warehouses/_clickhouse_types.py",
    }

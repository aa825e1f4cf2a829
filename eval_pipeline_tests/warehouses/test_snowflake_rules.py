"""Snowflake's rules without a server: the statement check, a role's grants judged, types kept, a nao database read, secrets kept secret.

What the emulator cannot show (a real account's grants, its roles' inheritance) is shown
here on the rows `SHOW GRANTS TO ROLE` gives, as Snowflake documents them.
"""

from __future__ import annotations

import datetime as dt
import inspect
import re
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from eval_pipeline.sandbox import ForbiddenStatement, QueryFailed
from eval_pipeline.suite import (
    ENGINES,
    DatabaseConfig,
    Templated,
    engine_named,
    load_config,
    redact,
)
from eval_pipeline.warehouses import StableCallables, snowflake_options
from eval_pipeline.warehouses._snowflake_grants import (  # the unit itself: SHOW GRANTS rows as an account prints them, which the emulator cannot
    Grant,
    grants_held,
    secondary_roles,
)
from eval_pipeline.warehouses._snowflake_types import (  # the unit itself: batches typed as the connector types them, which the emulator does not vary
    arrow_type_of,
    conform_batch,
)

ENGINE = engine_named("snowflake")


def require_snowflake_reading_statement(sql: str) -> str:
    """The engine's statement rules, as the sandbox calls them."""
    return ENGINE.reading_statement(sql, StableCallables())


#: Statements a model could send to reach past reading: each refused before it is sent.
REFUSED = [
    "DELETE FROM orders",
    "INSERT INTO orders SELECT * FROM orders",
    "UPDATE orders SET amount = 0",
    "MERGE INTO orders USING orders AS o ON 1 = 1 WHEN MATCHED THEN DELETE",
    "CREATE TEMPORARY TABLE x AS SELECT 1 AS a",
    "CREATE OR REPLACE VIEW v AS SELECT 1 AS a",
    "DROP TABLE orders",
    "UNDROP TABLE orders",
    "ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = 0",
    "USE ROLE ACCOUNTADMIN",
    "USE SECONDARY ROLES ALL",
    "SET x = 1",
    "CALL my_procedure(1)",
    "EXECUTE IMMEDIATE 'DELETE FROM orders'",
    "EXECUTE IMMEDIATE $$DELETE FROM orders$$",
    "BEGIN DELETE FROM orders; END",
    "DECLARE n INT; BEGIN RETURN 1; END",
    "WITH p AS PROCEDURE () RETURNS INT LANGUAGE SQL AS $$ SELECT 1 $$ CALL p()",
    "COPY INTO @my_stage FROM orders",
    "COPY INTO orders FROM @my_stage",
    "PUT file:///etc/passwd @my_stage",
    "GET @my_stage file:///tmp/",
    "LIST @my_stage",
    "REMOVE @my_stage",
    "SELECT $1 FROM @my_stage",
    "SELECT $1 FROM @db.s.ext_stage/path/ (FILE_FORMAT => 'csv')",
    "SELECT * FROM 's3://bucket/file.csv'",
    "SELECT GET_PRESIGNED_URL(@my_stage, 'f.csv')",
    "SELECT * FROM TABLE(INFER_SCHEMA(LOCATION => '@my_stage'))",
    "SELECT SYSTEM$CANCEL_QUERY('01a2')",
    "SELECT SYSTEM$ABORT_SESSION(1)",
    "SELECT SYSTEM$WAIT(100)",
    "SELECT my_udf(amount) FROM orders",
    "SELECT analytics.my_external_function(amount) FROM orders",
    "SELECT * FROM TABLE(RESULT_SCAN(LAST_QUERY_ID()))",
    "SELECT my_sequence.NEXTVAL",
    "SELECT 1; SELECT 2",
    "SELECT 1 AS a /* a /* nested */ comment */",
    "SELECT 1 AS a --\u3000comment\n, SYSTEM$WAIT(100)",
    "SELECT 1 INTO :x",
    # `a$$b` is a name: what follows is no string, and the comment is dropped.
    "SELECT 1 AS a$$b -- $$\n, SYSTEM$WAIT(100)",
    "",
]
ALLOWED = [
    "SELECT SUM(amount) AS revenue FROM orders",
    "WITH t AS (SELECT * FROM orders) SELECT status, COUNT(*) FROM t GROUP BY status",
    "SELECT IFF(amount > 100, 'big', 'small'), DATEADD(day, 1, ordered_at) FROM orders",
    "SELECT v:a.b::int, f.value FROM events, LATERAL FLATTEN(input => v:items) AS f",
    "SELECT * FROM TABLE(GENERATOR(ROWCOUNT => 10))",
    "SELECT * FROM orders AT(OFFSET => -60)",
    "SELECT '@not_a_stage' AS s, $$it's text$$ AS t, 'a\\'b' AS u",
    "SELECT TRY_TO_DATE('2024-01-01'), HASH(1), SYSTEM$TYPEOF(1)",
    "SELECT * FROM IDENTIFIER('orders')",
    "SHOW TABLES",
    "DESCRIBE TABLE orders",
]


@pytest.mark.parametrize("sql", REFUSED)
def test_a_statement_that_is_not_one_plain_read_is_refused(sql):
    with pytest.raises((ForbiddenStatement, QueryFailed)):
        require_snowflake_reading_statement(sql)


@pytest.mark.parametrize("sql", ALLOWED)
def test_reads_pass_and_are_sent_as_they_were_read(sql):
    assert require_snowflake_reading_statement(sql) == sql


def test_comments_are_dropped_from_what_is_sent_and_strings_kept():
    sql = "SELECT 1 AS a -- one\n, 2 AS b // two\n, '--x' AS c /* three */ FROM orders"
    sent = require_snowflake_reading_statement(sql)
    assert sent == "SELECT 1 AS a  \n, 2 AS b  \n, '--x' AS c   FROM orders"
    refused = "The function SYSTEM$WAIT is not allowed"
    with pytest.raises(ForbiddenStatement, match=refused.replace("$", r"\$")):
        require_snowflake_reading_statement("SELECT /* x */ SYSTEM$WAIT(1)")


def grants_of(table: dict[str, list[Grant]]):
    return lambda kind, name: table.get(f"{kind} {name}".upper(), [])


READER = [
    Grant("USAGE", "WAREHOUSE", "EVAL_WH"),
    Grant("USAGE", "DATABASE", "SHOP"),
    Grant("USAGE", "SCHEMA", "SHOP.PUBLIC"),
    Grant("SELECT", "TABLE", "SHOP.PUBLIC.ORDERS"),
    Grant("SELECT", "VIEW", "SHOP.PUBLIC.DAILY"),
    Grant("REFERENCES", "TABLE", "SHOP.PUBLIC.ORDERS"),
]


def test_a_role_that_only_reads_holds_nothing():
    assert grants_held(["EVAL_READER"], grants_of({"ROLE EVAL_READER": READER})) == []


def test_what_a_role_can_write_create_or_own_is_held_through_every_inherited_role():
    table = {
        "ROLE ANALYST": [*READER, Grant("USAGE", "ROLE", "LOADER")],
        "ROLE LOADER": [
            Grant("INSERT", "TABLE", "SHOP.PUBLIC.ORDERS"),
            Grant("USAGE", "DATABASE_ROLE", "SHOP.OWNERS"),
        ],
        "DATABASE ROLE SHOP.OWNERS": [Grant("OWNERSHIP", "SCHEMA", "SHOP.PUBLIC")],
        "ROLE PUBLIC": [Grant("CREATE TABLE", "SCHEMA", "SHOP.SCRATCH")],
        "ROLE HELPER": [Grant("SELECT", "TABLE", "SHOP.PUBLIC.ORDERS", grant_option=True)],
    }
    held = grants_held(["ANALYST", "HELPER"], grants_of(table))
    assert held == [
        "SELECT on TABLE SHOP.PUBLIC.ORDERS WITH GRANT OPTION",
        "CREATE TABLE on SCHEMA SHOP.SCRATCH",
        "INSERT on TABLE SHOP.PUBLIC.ORDERS (through role ANALYST)",
        "OWNERSHIP on SCHEMA SHOP.PUBLIC (through role ANALYST)",
    ]


def test_the_system_roles_and_unknown_privileges_are_held():
    table = {
        "ROLE R": [Grant("USAGE", "ROLE", "SYSADMIN"), Grant("APPLYBUDGET", "DATABASE", "SHOP")],
        "ROLE SYSADMIN": [],
    }
    assert grants_held(["R"], grants_of(table)) == [
        "APPLYBUDGET on DATABASE SHOP",
        "the system role SYSADMIN (through role R)",
    ]
    assert grants_held(["ACCOUNTADMIN"], grants_of({})) == ["the system role ACCOUNTADMIN"]


def test_secondary_roles_and_show_grants_rows_are_read_as_snowflake_prints_them():
    assert secondary_roles('{"roles":"ANALYST,LOADER","value":"ALL"}') == ["ANALYST", "LOADER"]
    assert secondary_roles('{"roles":"","value":""}') == []
    row = {
        "privilege": "select",
        "granted_on": "MATERIALIZED VIEW",
        "name": "V",
        "grant_option": "true",
    }
    assert Grant.from_row(row) == Grant("SELECT", "MATERIALIZED_VIEW", "V", True)


def test_each_type_is_cast_to_its_declared_duckdb_type_and_what_will_not_cast_is_text():
    kinds = [
        arrow_type_of(0, 38, 0),  # NUMBER(38,0)
        arrow_type_of(0, 18, 0),  # NUMBER(18,0): COUNT(*)
        arrow_type_of(0, 12, 2),  # NUMBER(12,2)
        arrow_type_of(5, None, None),  # VARIANT
        arrow_type_of(7, 0, 9),  # TIMESTAMP_TZ
        arrow_type_of(8, 0, 9),  # TIMESTAMP_NTZ
        arrow_type_of(15, None, None),  # GEOMETRY
    ]
    assert [str(k) for k in kinds] == [
        "decimal128(38, 0)", "int64", "decimal128(12, 2)", "string",
        "timestamp[us, tz=UTC]", "timestamp[us]", "string",
    ]  # fmt: skip
    batch = pa.RecordBatch.from_pydict(
        {
            # A batch of small numbers comes as int8, a wide one as decimal128.
            "big": pa.array([1, None], pa.int8()),
            "n": pa.array([5, 7], pa.int16()),
            "money": pa.array([Decimal("1.50"), Decimal("99999.99")], pa.decimal128(12, 2)),
            "v": pa.array(['{"a":1}', None]),
            "tz": pa.array([dt.datetime(2024, 1, 1, 8), None], pa.timestamp("us", tz="Etc/UTC")),
            "ntz": pa.array([dt.datetime(9999, 12, 31), None], pa.timestamp("us")),
            # A structured value the client types its own way: its JSON text.
            "geo": pa.array([{"x": 1, "y": 2}, None]),
        }
    )
    out = conform_batch(batch, kinds)
    assert out.schema.types == kinds
    assert out.to_pylist()[0] == {
        "big": Decimal(1),
        "n": 5,
        "money": Decimal("1.50"),
        "v": '{"a":1}',
        "tz": dt.datetime(2024, 1, 1, 8, tzinfo=dt.UTC),
        "ntz": dt.datetime(9999, 12, 31),
        "geo": '{"x": 1, "y": 2}',
    }
    # A value the declared type cannot hold is its text, never a rounded number.
    cut = conform_batch(pa.RecordBatch.from_pydict({"x": pa.array([1.25])}), [pa.int64()])
    assert cut.column(0).to_pylist() == ["1.25"]


def test_a_url_gives_the_connectors_options_and_refuses_unknown_ones():
    url = (
        "snowflake://reader:p%40ss@xy12345.eu-west-1/SHOP/PUBLIC?warehouse=EVAL_WH&role=R"
        "&private_key_path=/keys/k.p8&passphrase=pp"
    )
    assert snowflake_options(url) == {
        "account": "xy12345.eu-west-1",
        "user": "reader",
        "password": "p@ss",
        "database": "SHOP",
        "schema": "PUBLIC",
        "warehouse": "EVAL_WH",
        "role": "R",
        "private_key_path": "/keys/k.p8",
        "passphrase": "pp",
    }
    with pytest.raises(ValueError, match="unknown option 'client_session_keep_alive'"):
        snowflake_options("snowflake://u@acct/db?client_session_keep_alive=true")


def test_a_nao_snowflake_database_is_read_with_naos_own_fields(tmp_path, monkeypatch):
    (tmp_path / "nao_config.yaml").write_text(
        textwrap.dedent(
            """\
            databases:
              - name: warehouse
                type: snowflake
                account_id: xy12345.eu-west-1
                username: eval reader
                private_key_path: /keys/rsa key.p8
                passphrase: "{{ env('SF_KEY_PASSPHRASE') }}"
                database: SHOP
                schema: MARTS
                warehouse: EVAL_WH
                include: ["MARTS.*"]
            test:
              models: [openai:gpt-4.1]
            """
        )
    )
    assert ENGINES.get("snowflake") is ENGINE
    (database,) = load_config(tmp_path).databases
    assert database.type == "snowflake"
    monkeypatch.setenv("SF_KEY_PASSPHRASE", "Key-Passphrase-0193")
    url = database.resolve_url()
    assert url == (
        "snowflake://eval%20reader@xy12345.eu-west-1/SHOP/MARTS?warehouse=EVAL_WH"
        "&private_key_path=%2Fkeys%2Frsa%20key.p8&passphrase=Key-Passphrase-0193"
    )
    options = snowflake_options(url)
    assert (options["user"], options["schema"]) == ("eval reader", "MARTS")
    assert options["private_key_path"] == "/keys/rsa key.p8"
    # The passphrase is a secret from the moment it is read: redacted wherever text goes.
    assert "Key-Passphrase-0193" not in redact(f"cannot read the key: {url}")
    assert ENGINE.run_note(database) == (
        "note: database 'warehouse' (snowflake) runs its queries on warehouse 'EVAL_WH' of "
        "account 'xy12345.eu-west-1', whose credits they spend (each tagged "
        "QUERY_TAG=eval_pipeline)"
    )


def test_a_nao_database_without_its_account_is_named_with_its_line(tmp_path):
    (tmp_path / "nao_config.yaml").write_text(
        "databases:\n  - name: sf\n    type: snowflake\n    username: u\n    database: D\n"
        "test:\n  models: [openai:gpt-4.1]\n"
    )
    with pytest.raises(Exception) as refused:
        load_config(tmp_path)
    assert "nao_config.yaml:3: databases[0].account_id: required for Snowflake databases" in str(
        refused.value
    )


def test_a_password_in_the_url_is_a_secret():
    url = Templated("snowflake://u:{{ env('SF_TEST_PW') }}@acct/db", secret="url_password")
    url.resolve({"SF_TEST_PW": "Pass-Word-7781"})
    assert "Pass-Word-7781" not in redact("login failed for Pass-Word-7781")


def test_the_engine_is_its_own_modules_and_no_other_product_module_names_it():
    product = Path(__file__).resolve().parents[2] / "eval_pipeline"
    names_it = re.compile(r"[\"']snowflake[\"']", re.IGNORECASE)
    naming = sorted(
        path.relative_to(product).as_posix()
        for path in product.rglob("*.py")
        if names_it.search(path.read_text(encoding="utf-8"))
    )
    # The registry names it as an entry point names its object; the rest is its own modules.
    assert "suite/_engines.py" in naming
    others = [n for n in naming if n != "suite/_engines.py"]
    assert others and all(Path(n).name.startswith("_snowflake") for n in others), naming
    parts = (ENGINE.connect, ENGINE.reading_statement, ENGINE.nao_url, ENGINE.run_note)
    assert {Path(inspect.getsourcefile(part)).name for part in parts} == {"_snowflake_engine.py"}


def test_without_the_client_the_database_is_refused_naming_the_extra(monkeypatch):
    from eval_pipeline.warehouses import ConnectionFailed, connect

    monkeypatch.setitem(sys.modules, "snowflake.connector", None)  # as if never installed
    database = DatabaseConfig("sf", "snowflake", url=Templated("snowflake://u@acct/db"))
    with pytest.raises(ConnectionFailed) as refused:
        connect(database)
    assert refused.value.message == (
        "database 'sf' (snowflake): the Snowflake client is not installed; "
        "pip install 'eval-pipeline[snowflake]'"
    )


def test_a_key_pair_login_reads_the_encrypted_key_and_names_a_wrong_passphrase(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from eval_pipeline.warehouses import ConnectionFailed, SnowflakeConnection

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "rsa_key.p8"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"Key-Passphrase-5521"),
        )
    )
    connection = SnowflakeConnection.__new__(SnowflakeConnection)  # no session: the key alone
    connection.database = DatabaseConfig("sf", "snowflake", url=Templated("snowflake://u@a/d"))
    der = connection._private_key(str(path), "Key-Passphrase-5521")
    assert serialization.load_der_private_key(der, None).public_key() == key.public_key()
    with pytest.raises(ConnectionFailed) as wrong:
        connection._private_key(str(path), "Not-The-Passphrase")
    assert wrong.value.message.startswith(
        f"database 'sf' (snowflake): cannot read the private key {path}"
    )
    assert "Not-The-Passphrase" not in wrong.value.message

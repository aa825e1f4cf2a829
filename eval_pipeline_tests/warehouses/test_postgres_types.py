"""Every PostgreSQL type a table can hold, through the agent's sandbox: its value, or the server's text of it.

The types are read from the server's own `pg_type` (base types, their arrays, ranges,
multiranges, a composite, a domain, an enum), so a type the list below lacks fails the test
by name. Each value must come back as what `to_json` says it is (numbers as numbers, dates
as ISO text, arrays as lists) or as the server prints it (`::text`): never a wrong number,
never an error.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math

import psycopg
import pytest

from eval_pipeline.sandbox import ServerSandbox
from eval_pipeline_tests.warehouses.conftest import database_of
from eval_pipeline_tests.warehouses.servers import Server

pytestmark = pytest.mark.slow

#: A value of each base type of pg_catalog, as SQL.
SAMPLES = {
    "aclitem": "'pg_read_all_data=r/pg_read_all_data'",
    "bit": "B'101'",
    "bool": "true",
    "box": "'(1,1),(0,0)'",
    "bpchar": "'ab'::char(3)",
    "bytea": "'\\x00ff'",
    "char": "'a'",
    "cid": "'7'",
    "cidr": "'10.0.0.0/8'",
    "circle": "'<(1,1),2>'",
    "date": "'2024-02-29'",
    "float4": "1.1",
    "float8": "-2.5e-300",
    "gtsvector": None,  # no input: an index's internal type, never a column's value
    "inet": "'192.168.0.1/24'",
    "int2": "-32768",
    "int2vector": "'1 2'",
    "int4": "2147483647",
    "int8": "9223372036854775807",
    "interval": "'1 mon 2 days 03:04:05.5'",
    "json": "'{\"a\": [1, 2.5, null]}'",
    "jsonb": "'{\"a\": [1, 2.5, null]}'",
    "jsonpath": "'$.a[*] ? (@ > 1)'",
    "line": "'{1,-1,0}'",
    "lseg": "'[(0,0),(1,1)]'",
    "macaddr": "'08:00:2b:01:02:03'",
    "macaddr8": "'08:00:2b:01:02:03:04:05'",
    "money": "1",
    "name": "'a name'",
    "numeric": "123456789012.345",
    "oid": "4000000000",
    "oidvector": "'1 2 4000000000'",
    "path": "'[(0,0),(1,1),(2,0)]'",
    "pg_lsn": "'16/B374D848'",
    "pg_snapshot": "'10:20:10,14,15'",
    "point": "'(1.5,2)'",
    "polygon": "'((0,0),(1,1),(1,0))'",
    "refcursor": "'a cursor'",
    "regclass": "'pg_class'",
    "regcollation": "'\"C\"'",
    "regconfig": "'english'",
    "regdictionary": "'simple'",
    "regnamespace": "'pg_catalog'",
    "regoper": "'||/'",
    "regoperator": "'+(integer,integer)'",
    "regproc": "'now'",
    "regprocedure": "'abs(integer)'",
    "regrole": "'pg_read_all_data'",
    "regtype": "'integer'",
    "text": "'héllo, \"world\"'",
    "tid": "'(0,1)'",
    "time": "'23:59:59.999999'",
    "timestamp": "'2024-02-29 12:34:56.789'",
    "timestamptz": "'2024-02-29 12:34:56.789+02'",
    "timetz": "'12:34:56+02'",
    "tsquery": "'fat & rat'",
    "tsvector": "'a fat cat'",
    "txid_snapshot": "'10:20:10,14,15'",
    "uuid": "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
    "varbit": "B'10101'",
    "varchar": "'a varchar'",
    "xid": "'42'",
    "xid8": "'42'",
    "xml": "'<a>1</a>'",
    "int4range": "'[1,5)'",
    "int8range": "'[1,5)'",
    "numrange": "'[1.5,2.5]'",
    "daterange": "'[2024-01-01,2024-02-01)'",
    "tsrange": "'[2024-01-01 10:00,2024-01-01 11:00)'",
    "tstzrange": "'[2024-01-01 10:00+00,2024-01-01 11:00+00)'",
    "int4multirange": "'{[1,3), [5,7)}'",
    "int8multirange": "'{[1,3)}'",
    "nummultirange": "'{[1.5,2.5]}'",
    "datemultirange": "'{[2024-01-01,2024-02-01)}'",
    "tsmultirange": "'{[2024-01-01 10:00,2024-01-01 11:00)}'",
    "tstzmultirange": "'{[2024-01-01 10:00+00,2024-01-01 11:00+00)}'",
}
#: Types no reader can hold a value of: their input refuses every text, and the only values
#: are in catalogues a reader cannot see (pg_statistic_ext_data) or a view's parse tree.
NO_VALUE = {
    "pg_brin_bloom_summary",
    "pg_brin_minmax_multi_summary",
    "pg_dependencies",
    "pg_mcv_list",
    "pg_ndistinct",
    "pg_node_tree",
}
#: Values each engine stores but Python's types could not hold, or the client could misread.
EDGES = [
    "'infinity'::date",
    "'-infinity'::timestamp",
    "'infinity'::timestamptz",
    "'294276-01-01'::date",
    "'4713-01-01 BC'::date",
    "'NaN'::numeric",
    "'Infinity'::numeric",
    "1e400::numeric",
    "1.50::numeric(10,2)",
    "ARRAY[[1,2],[3,4]]",
    "'[0:1]={1,2}'::int[]",
    "ARRAY[]::int[]",
    "ARRAY['a', NULL, 'c']",
    "ROW(1, 'a')",
    "ARRAY['<a/>'::xml]",
    "ARRAY['{}'::json]",
    "ARRAY[1.5::numeric]",
    "ARRAY['2024-01-01'::date, 'infinity']",
    "ARRAY[1::money]",
]


@pytest.fixture(scope="module")
def user_types(postgres: Server):
    """A composite type, a domain (NOT NULL, over a numeric with a scale) and an enum, made
    by the owner for the test."""
    made = {
        "eval_pair": "CREATE TYPE eval_pair AS (n int, label text)",
        "eval_money": "CREATE DOMAIN eval_money AS numeric(8,2) NOT NULL CHECK (VALUE > 0)",
        "eval_mood": "CREATE TYPE eval_mood AS ENUM ('sad', 'happy')",
    }
    with psycopg.connect(postgres.owner.url, autocommit=True) as admin:
        for statement in made.values():
            admin.execute(statement)
        try:
            yield {
                "eval_pair": "ROW(7, 'seven')::eval_pair",
                "eval_money": "12.5::eval_money",
                "eval_mood": "'happy'::eval_mood",
            }
        finally:
            for name in made:
                admin.execute(f"DROP TYPE {name}")


def _expressions(admin: psycopg.Connection, user_types: dict[str, str]) -> list[str]:
    """A value of every type of pg_catalog a reader can hold, of an array of each, and of
    the test's own types: the server's list, so a type without a sample fails here."""
    types = admin.execute(
        "SELECT t.typname, t.typarray <> 0 FROM pg_type t "
        "JOIN pg_namespace n ON n.oid = t.typnamespace "
        "WHERE n.nspname = 'pg_catalog' AND t.typtype IN ('b', 'r', 'm') "
        "AND t.typcategory <> 'P' AND t.typname NOT LIKE '\\_%' ORDER BY 1"
    ).fetchall()
    missing = [name for name, _ in types if name not in SAMPLES and name not in NO_VALUE]
    assert not missing, f"no sample value for {missing}"
    expressions = []
    for name, has_array in types:
        sample = SAMPLES.get(name)
        if sample is None:
            continue
        expressions.append(f"({sample})::pg_catalog.{name}")
        if has_array:
            expressions.append(f"ARRAY[({sample})::pg_catalog.{name}]")
    for sample in user_types.values():
        expressions += [sample, f"ARRAY[{sample}]"]
    return expressions + EDGES


def test_every_type_comes_back_as_its_value_or_the_servers_text(postgres, user_types):
    with psycopg.connect(postgres.owner.url, autocommit=True) as admin:
        admin.execute("SET TIME ZONE 'UTC'")
        expressions = _expressions(admin, user_types)
        expected = {
            sql: admin.execute(f"SELECT ({sql})::text, to_json({sql})::text").fetchone()
            for sql in expressions
        }
    wrong = []
    with ServerSandbox(database_of(postgres)) as sandbox:
        for sql in expressions:
            try:
                [(value,)] = sandbox.execute(f"SELECT {sql} AS v").rows
            except Exception as error:  # a crash or a tool error: both are wrong here
                wrong.append(f"{sql}: {type(error).__name__}: {error}")
                continue
            text, as_json = expected[sql]
            if not (value == text or _same(value, json.loads(as_json), text)):
                wrong.append(f"{sql}: got {value!r}; the server says {text!r} / {as_json}")
    assert not wrong, "\n".join(wrong)
    assert len(expressions) > 150  # every type, and an array of nearly every one


def test_a_domains_null_and_a_cut_cell_keep_the_columns_type(postgres, user_types):
    with ServerSandbox(database_of(postgres)) as sandbox:
        result = sandbox.execute(
            "SELECT 12.5::eval_money AS price, repeat('x', 100000) AS big, "
            "1.25::numeric(6,2) AS scaled, 'infinity'::date AS d"
        )
    assert result.column_types == ["DECIMAL(8,2)", "VARCHAR", "DECIMAL(6,2)", "DATE"]
    price, big, scaled, day = result.rows[0]
    assert (price, scaled, day) == (12.5, 1.25, "infinity")
    assert big.endswith("[cut: 100,000 bytes, over limits.query_cell_max_bytes of 65,536]")


def _same(value: object, expected: object, text: str) -> bool:
    """Whether the sandbox's `value` is the value `to_json` gives (`expected`)."""
    if isinstance(value, str) and value.startswith("base64:"):  # bytea: '\\x00ff'
        return text.startswith("\\x") and base64.b64decode(value[7:]) == bytes.fromhex(text[2:])
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if isinstance(expected, int | float) and isinstance(value, int | float):
        return math.isclose(value, expected, rel_tol=1e-6)  # float4 widened to float8
    if isinstance(value, int) and isinstance(expected, str):  # to_json quotes an oid
        return str(value) == expected
    if isinstance(expected, list) and isinstance(value, list):
        return len(value) == len(expected) and all(
            _same(v, e, json.dumps(e)) for v, e in zip(value, expected, strict=True)
        )
    if isinstance(expected, str) and isinstance(value, str):
        return value == expected or _same_instant(value, expected)
    return value == expected


def _same_instant(value: str, expected: str) -> bool:
    """ISO dates, times and timestamps written alike but for trailing zeros of a fraction."""
    for kind in (dt.datetime, dt.time):
        try:
            return kind.fromisoformat(value) == kind.fromisoformat(expected)
        except ValueError:
            continue
    return False

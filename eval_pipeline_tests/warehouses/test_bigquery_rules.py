"""BigQuery's rules without a server: the statement check, the types, nao's fields, the secret, and what the emulator cannot show (job timeout and cancel, bytes billed, dry-run estimates) against a fake client that answers as BigQuery documents."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import textwrap
from decimal import Decimal
from types import SimpleNamespace
from typing import ClassVar

import duckdb
import pyarrow as pa
import pytest
from dateutil.relativedelta import relativedelta

from eval_pipeline.sandbox import ForbiddenStatement, QueryFailed
from eval_pipeline.sandbox._bigquery_engine import (  # the unit itself: nao's fields, no server
    ENGINE,
    nao_bigquery_url,
)
from eval_pipeline.sandbox._bigquery_statements import (  # the unit itself: the rules alone
    require_bigquery_reading_statement,
)
from eval_pipeline.suite import DatabaseConfig, Templated, engine_named, load_config, redact
from eval_pipeline.warehouses import StatementFailed, StatementTimeout, connect
from eval_pipeline.warehouses._bigquery import (  # the unit itself: the URL, a fake client
    MAXIMUM_BYTES_BILLED,
    parse_bigquery_url,
)
from eval_pipeline.warehouses._bigquery_types import (  # the unit itself: types the emulator lacks
    ValueDoesNotFit,
    batch_of_columns,
    plan_columns,
)

google_bigquery = pytest.importorskip("google.cloud.bigquery")

ALLOWED = [
    "SELECT 1",
    "SELECT status, COUNT(*) AS n FROM orders GROUP BY status  # a comment",
    "WITH a AS (SELECT 1 AS x) SELECT x FROM a UNION ALL SELECT 2",
    "SELECT SAFE.PARSE_DATE('%Y-%m-%d', '2024-01-01') AS d, NET.HOST('https://x.org/a') AS h",
    "SELECT * FROM `eval-project.shop.orders` WHERE note = 'gs://not/a/load'",
    "SELECT HLL_COUNT.MERGE(sketch) FROM sketches",
]
REFUSED = [
    "DELETE FROM orders WHERE TRUE",
    "CREATE TEMP FUNCTION f(x INT64) AS (x)",
    "DECLARE x INT64 DEFAULT 1",
    "BEGIN SELECT 1; END",
    "CALL shop.clean_up()",
    "EXECUTE IMMEDIATE 'DROP TABLE orders'",
    "EXPORT DATA OPTIONS(uri='gs://b/x-*.csv', format='CSV') AS SELECT 1",
    "LOAD DATA INTO shop.t FROM FILES(format='CSV', uris=['gs://b/x.csv'])",
    "SELECT * FROM EXTERNAL_QUERY('us.conn', 'SELECT 1')",
    "SELECT shop.remote_fn(1)",
    "SELECT `other-project.ds`.fn(1)",
    "SELECT AI.GENERATE('write a poem')",
    "SELECT * FROM ML.PREDICT(MODEL shop.m, (SELECT 1 AS x))",
    "SELECT * FROM shop.table_function(1)",
    "SELECT 1; SELECT 2",
    "",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_a_query_passes_as_written(sql):
    assert require_bigquery_reading_statement(sql) == sql.strip()


@pytest.mark.parametrize("sql", REFUSED)
def test_writes_scripts_files_and_outside_calls_are_refused(sql):
    with pytest.raises(ForbiddenStatement):
        require_bigquery_reading_statement(sql)


def test_a_refusal_says_bigquery_runs_queries_only_and_what_is_refused():
    with pytest.raises(ForbiddenStatement) as refused:
        require_bigquery_reading_statement("MERGE t USING s ON TRUE WHEN MATCHED THEN DELETE")
    assert "queries only" in str(refused.value) and "EXPORT DATA" in str(refused.value)
    with pytest.raises(QueryFailed, match="could not be parsed as BigQuery"):
        require_bigquery_reading_statement("SELECT 'unterminated")


def batch_of_rows(plans, rows):
    return batch_of_columns(plans, [list(column) for column in zip(*rows, strict=True)])


def _columns(rows):
    return [list(column) for column in zip(*rows, strict=True)]


def _field(name, kind, mode="NULLABLE"):
    return SimpleNamespace(name=name, field_type=kind, mode=mode)


def test_bignumeric_is_a_decimal_when_it_fits_and_text_when_not_never_rounded():
    wide = Decimal("12345678901234567890123456789012345678.12345")
    plans = plan_columns(
        [_field("a", "BIGNUMERIC"), _field("b", "BIGNUMERIC")], _columns([(Decimal("1.25"), wide)])
    )
    assert [p.duckdb for p in plans] == ["DECIMAL(38,2)", "VARCHAR"]
    batch = batch_of_rows(plans, [(Decimal("1.25"), wide)])
    assert batch.column(0).to_pylist() == [Decimal("1.25")]
    assert batch.column(1).to_pylist() == [str(wide)]  # every digit, as text
    with pytest.raises(ValueDoesNotFit, match="CAST it to STRING"):
        batch_of_rows(plans, [(Decimal("1.125"), None)])  # a later page: not rounded


def test_nested_json_interval_and_both_timestamps_keep_their_meaning():
    schema = [
        _field("s", "RECORD"),
        _field("arr", "INTEGER", "REPEATED"),
        _field("j", "JSON"),
        _field("iv", "INTERVAL"),
        _field("dt", "DATETIME"),
        _field("ts", "TIMESTAMP"),
        _field("n", "NUMERIC"),
    ]
    row = (
        {"a": 1, "when": dt.date(2024, 1, 2)},
        [3, 1],
        {"k": [1, 2]},
        relativedelta(years=1, months=2, days=3, hours=4, minutes=5, seconds=6),
        dt.datetime(2024, 3, 1, 9, 30),
        dt.datetime(2024, 3, 1, 9, 30, tzinfo=dt.UTC),
        Decimal("99999999999999999999999999999.999999999"),
    )
    plans = plan_columns(schema, _columns([row]))
    assert [p.duckdb for p in plans] == [
        "VARCHAR", "VARCHAR", "VARCHAR", "INTERVAL", "TIMESTAMP",
        "TIMESTAMP WITH TIME ZONE", "DECIMAL(38,9)",
    ]  # fmt: skip
    batch = batch_of_rows(plans, [row])
    assert json.loads(batch.column(0)[0].as_py()) == {"a": 1, "when": "2024-01-02"}
    assert batch.column(1)[0].as_py() == "[3, 1]"
    # DuckDB reads the interval as BigQuery holds it: 14 months, 3 days, 4:05:06.
    arrow_rows = pa.Table.from_batches([batch])  # noqa: F841 (read by DuckDB below)
    months, days, text = duckdb.sql(
        "SELECT datepart('month', iv) + 12 * datepart('year', iv), datepart('day', iv), "
        "CAST(iv AS VARCHAR) FROM arrow_rows"
    ).fetchall()[0]
    assert (months, days) == (14, 3) and text.endswith("04:05:06")
    assert batch.column(6)[0].as_py() == Decimal("99999999999999999999999999999.999999999")


def test_nao_fields_make_the_url_and_the_key_must_come_from_the_environment():
    url = nao_bigquery_url(
        {
            "project_id": "acme-prod",
            "dataset_id": "marts",
            "location": "EU",
            "credentials_path": "%2Fkeys%2Fsa.json",
            "max_query_size": "2.5",
            "sso": "false",
            "partition_filters": "%7B%7D",
        }
    )
    assert url == (
        "bigquery://acme-prod/marts?location=EU&credentials_path=%2Fkeys%2Fsa.json"
        "&maximum_bytes_billed=2500000000"
    )
    with pytest.raises(KeyError, match="dataset_id"):
        nao_bigquery_url({"project_id": "p"})
    with pytest.raises(ValueError, match="from the environment"):
        nao_bigquery_url({"project_id": "p", "dataset_id": "d", "credentials_json": "%7B%7D"})


def test_a_nao_project_keeps_credentials_json_a_template_and_never_shows_a_written_key(tmp_path):
    (tmp_path / "tests").mkdir()
    config = tmp_path / "nao_config.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            databases:
              - name: bq
                type: bigquery
                project_id: acme-prod
                dataset_id: marts
                credentials_json: "{{ env('GCP_SA_JSON') }}"
            """
        )
    )
    (bq,) = load_config(tmp_path).databases
    assert bq.type == "bigquery" and "GCP_SA_JSON" in bq.url.template
    config.write_text(
        textwrap.dedent(
            """\
            databases:
              - name: bq
                type: bigquery
                project_id: acme-prod
                dataset_id: marts
                credentials_json: {type: service_account, private_key: WrittenKey-0123456789}
            """
        )
    )
    with pytest.raises(Exception) as refused:
        load_config(tmp_path)
    assert "from the environment" in str(refused.value)
    assert "WrittenKey" not in str(refused.value)


def test_the_credentials_json_of_a_url_is_a_secret_once_read(monkeypatch):
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC-unit-test\n-----END PRIVATE KEY-----\n"
    credentials = json.dumps({"type": "service_account", "private_key": key, "client_email": "a@b"})
    monkeypatch.setenv("BQ_UNIT_CREDENTIALS", credentials)
    url = Templated(
        "bigquery://p/d?credentials_json={{ env('BQ_UNIT_CREDENTIALS') }}",
        secret="url_password",
        percent_encode=True,
    ).resolve()
    target = parse_bigquery_url(url)
    assert json.loads(target.credentials_json)["private_key"] == key
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in redact(f"log line: {credentials} / {url}")
    assert "MIIEvQ" not in repr(target)


class FakeJob:
    def __init__(self, client, sql, config, job_id):
        self.client, self.sql, self.config, self.job_id = client, sql, config, job_id
        self.statement_type = client.statement_type
        self.total_bytes_processed = client.scans

    def result(self, **_kwargs):
        if self.client.outcome is not None:
            raise self.client.outcome
        schema = [SimpleNamespace(name="n", field_type="INTEGER", mode="NULLABLE")]
        page = [SimpleNamespace(values=lambda: (1,))]
        return SimpleNamespace(schema=schema, pages=iter([page]))


class FakeClient:
    """Answers as BigQuery documents it: a dry run tells the statement's type and the bytes it
    scans; `result` fails with the job's own error."""

    statement_type, scans, outcome = "SELECT", 1_000, None
    made: ClassVar[list[FakeClient]] = []

    def __init__(self, **kwargs):
        self.kwargs, self.jobs, self.cancelled = kwargs, [], []
        FakeClient.made.append(self)

    def get_dataset(self, *_args, **_kwargs):
        return None

    def query(self, sql, job_config=None, job_id=None, **_kwargs):
        job = FakeJob(self, sql, job_config, job_id)
        self.jobs.append(job)
        return job

    def cancel_job(self, job_id, **_kwargs):
        self.cancelled.append(job_id)

    def close(self):
        pass


@pytest.fixture
def fake_bigquery(monkeypatch):
    FakeClient.made = []
    monkeypatch.setattr(google_bigquery, "Client", FakeClient)
    monkeypatch.setattr(FakeClient, "outcome", None)
    monkeypatch.setattr(FakeClient, "statement_type", "SELECT")
    return FakeClient


def _database(query: str = "") -> DatabaseConfig:
    url = "bigquery://acme/marts?api_endpoint=http://127.0.0.1:9" + (f"&{query}" if query else "")
    return DatabaseConfig("warehouse", "bigquery", url=Templated(url, secret="url_password"))


def test_every_job_is_a_bounded_query_dry_run_first(fake_bigquery):
    with connect(_database("maximum_bytes_billed=5000")) as connection:
        connection.begin_read_only(7.5)
        (batch,) = list(connection.stream("SELECT 1 AS n").batches)
    (client,) = fake_bigquery.made
    preview, job = client.jobs
    assert preview.config.dry_run and not job.config.dry_run
    assert int(job.config.job_timeout_ms) == 7500 and job.config.maximum_bytes_billed == 5000
    assert job.config.use_legacy_sql is False
    assert batch.column(0).to_pylist() == [1]


def test_a_query_the_dry_run_says_scans_past_the_cap_is_not_run(fake_bigquery, monkeypatch):
    monkeypatch.setattr(fake_bigquery, "scans", 3 * MAXIMUM_BYTES_BILLED)
    with connect(_database()) as connection:
        connection.begin_read_only(5.0)
        with pytest.raises(
            StatementFailed, match=r"would scan 3\.0 GB.*1\.0 GB one query may bill"
        ):
            connection.stream("SELECT * FROM events")
    (client,) = fake_bigquery.made
    assert [j.config.dry_run for j in client.jobs] == [True]  # never run


def test_what_bigquery_does_not_read_as_a_query_is_not_run(fake_bigquery, monkeypatch):
    monkeypatch.setattr(fake_bigquery, "statement_type", "SCRIPT")
    with connect(_database()) as connection:
        connection.begin_read_only(5.0)
        with pytest.raises(StatementFailed, match="reads this as a SCRIPT statement"):
            connection.stream("SELECT 1")
    assert len(fake_bigquery.made[0].jobs) == 1


def test_a_job_past_its_time_is_cancelled_on_the_server(fake_bigquery, monkeypatch):
    monkeypatch.setattr(fake_bigquery, "outcome", concurrent.futures.TimeoutError())
    with connect(_database()) as connection:
        connection.begin_read_only(2.0)
        with pytest.raises(StatementTimeout):
            connection.stream("SELECT 1")
    (client,) = fake_bigquery.made
    assert client.cancelled == [client.jobs[1].job_id]  # jobs.cancel of the job it started


def test_bytes_billed_over_the_cap_say_so(fake_bigquery, monkeypatch):
    from google.api_core.exceptions import BadRequest

    error = BadRequest(
        "Query exceeded limit for bytes billed: 1000000000. 20971520000 or higher required.",
        errors=[{"reason": "bytesBilledLimitExceeded"}],
    )
    monkeypatch.setattr(fake_bigquery, "outcome", error)
    with connect(_database()) as connection:
        connection.begin_read_only(5.0)
        with pytest.raises(StatementFailed, match=r"maximum_bytes_billed is 1\.0 GB per query"):
            connection.stream("SELECT 1")


def test_the_cost_preview_says_the_cap_and_what_the_references_scan(fake_bigquery, monkeypatch):
    monkeypatch.setattr(fake_bigquery, "scans", 250_000_000)
    line = ENGINE.cost_preview(_database(), ["SELECT 1", "SELECT 2", "DELETE FROM t WHERE TRUE"])
    assert line.startswith("database 'warehouse' (BigQuery): each query may bill at most 1.0 GB")
    assert "(the default; set ?maximum_bytes_billed= in the URL)" in line
    assert (
        "the 2 reference queries will scan 500.0 MB" in line and "1 could not be estimated" in line
    )
    assert engine_named("bigquery") is ENGINE


def test_without_the_client_the_error_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_google(name, *args, **kwargs):
        if name.startswith("google.cloud"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_google)
    with pytest.raises(Exception, match=r"pip install 'eval-pipeline\[bigquery\]'"):
        connect(_database())

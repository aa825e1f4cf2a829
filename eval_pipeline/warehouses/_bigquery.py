"""BigQuery sessions through `google-cloud-bigquery`: query jobs only, each bounded in time (job timeout, then `jobs.cancel`) and in money (`maximum_bytes_billed`).

A database is `bigquery://PROJECT/DATASET` with options as query parameters:
`location`, `credentials_path` (a service account's key file) or `credentials_json` (its
JSON, a secret: read from the environment, registered with the redactor, never kept),
`maximum_bytes_billed` (bytes one query may bill; `MAXIMUM_BYTES_BILLED` when not given)
and `api_endpoint` (another address of the API, such as an emulator's; the client also
reads one from `BIGQUERY_EMULATOR_HOST`), where no credentials are sent unless given. Without credentials the client uses Application
Default Credentials.

BigQuery has no read-only session: what keeps a job to reading is that only query jobs are
made, each statement first checked by the sandbox's rules and then by BigQuery's own
parser through a dry run (free; it also tells the bytes the query will scan), and only a
`SELECT` is run. Every API call has a timeout and a bounded retry, so an unreachable
endpoint costs seconds, never the default ten minutes of retries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow as pa

from eval_pipeline.suite import DatabaseConfig, register_secret
from eval_pipeline.warehouses._bigquery_types import (
    ValueDoesNotFit,
    batch_of_columns,
    plan_columns,
)
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

__all__ = [
    "CATALOGUE",
    "MAXIMUM_BYTES_BILLED",
    "BigQueryConnection",
    "BigQueryTarget",
    "bytes_text",
    "dry_run_bytes",
    "parse_bigquery_url",
]

#: Bytes one query may bill when the URL gives no `maximum_bytes_billed`: 1 GB, about
#: $0.006 at on-demand pricing ($6.25 per TiB). A query that would bill more fails on the
#: server before it runs, and is refused here first when its dry run says so.
MAXIMUM_BYTES_BILLED = 1_000_000_000
#: US dollars per TiB billed on demand (BigQuery's list price), for the cost shown.
ON_DEMAND_USD_PER_TIB = 6.25
#: Rows per REST page of a result: what is in memory at once is one page (and the rows the
#: sandbox keeps, `limits.query_max_bytes`).
PAGE_ROWS = 2_000
#: Seconds an API call may wait past the statement's time limit before it is given up (the
#: job is then cancelled): below the sandbox's own deadline grace, so the sandbox hears a
#: timeout rather than abandoning the session.
NETWORK_GRACE_S = 3.0
#: The catalogue: `Engine.catalogue_sql` of BigQuery, answered from the tables API
#: (`tables.list`/`tables.get`: table and column descriptions, nested types spelled out)
#: instead of `INFORMATION_SCHEMA`, which must be qualified by the dataset, bills at least
#: 10 MB per query and is not cached.
CATALOGUE = (
    "-- the dataset's tables, read through the BigQuery tables API\n"
    "SELECT table_name, column_name, data_type, table_description, column_description "
    "FROM INFORMATION_SCHEMA.COLUMN_FIELD_PATHS"
)
_STATEMENT_QUERY = "SELECT"
#: The variable the client reads an emulator's address from (`http://host:port`).
EMULATOR_VARIABLE = "BIGQUERY_EMULATOR_HOST"
_REQUEST = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) \S+: ")
#: What the client appends to a job's error: its location and id, no help to the reader.
_JOB_SUFFIX = re.compile(r"\s*Location: \S+ Job ID: \S+\s*$")


@dataclass(frozen=True)
class BigQueryTarget:
    """What a `bigquery://` URL says, its credentials JSON kept only here, never in text."""

    project: str
    dataset: str
    location: str | None = None
    credentials_path: str | None = None
    credentials_json: str | None = None
    maximum_bytes_billed: int = MAXIMUM_BYTES_BILLED
    api_endpoint: str | None = None

    def __repr__(self) -> str:  # never the credentials
        return f"BigQueryTarget({self.project!r}, {self.dataset!r}, location={self.location!r})"


def parse_bigquery_url(url: str, dataset: str | None = None) -> BigQueryTarget:
    """The target of `bigquery://PROJECT/DATASET?options`; `dataset` (a database's `schema`)
    wins over the URL's. A `credentials_json` value is registered as a secret at once.

    Raises:
        ValueError: no project or dataset, an unknown option, a bound that is no number.
    """
    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    secret = options.get("credentials_json")
    if secret:
        register_secret(secret)
        with contextlib.suppress(ValueError):  # its key, one line of it per \n
            register_secret(json.loads(secret).get("private_key", ""))
    project = unquote(parts.netloc)
    chosen = dataset or unquote(parts.path.strip("/"))
    if not project or not chosen:
        raise ValueError("a BigQuery URL is bigquery://PROJECT/DATASET")
    known = {"location", "credentials_path", "credentials_json", "maximum_bytes_billed"}
    unknown = sorted(set(options) - known - {"api_endpoint"})
    if unknown:
        raise ValueError(
            f"unknown BigQuery option {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    billed = options.get("maximum_bytes_billed") or str(MAXIMUM_BYTES_BILLED)
    if not billed.isdigit() or int(billed) <= 0:
        raise ValueError(f"maximum_bytes_billed must be a number of bytes, got {billed!r}")
    return BigQueryTarget(
        project=project,
        dataset=chosen,
        location=options.get("location") or None,
        credentials_path=options.get("credentials_path") or None,
        credentials_json=secret or None,
        maximum_bytes_billed=int(billed),
        api_endpoint=options.get("api_endpoint") or None,
    )


def bytes_text(count: int) -> str:
    """`count` bytes as a person reads them (decimal units, as BigQuery bills)."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{count} B"


def on_demand_usd(count: int) -> float:
    """What `count` bytes billed cost on demand, in US dollars."""
    return count / 2**40 * ON_DEMAND_USD_PER_TIB


class BigQueryConnection(WarehouseConnection):
    dialect = "bigquery"

    def __init__(self, database: DatabaseConfig, url: str) -> None:
        super().__init__(database)
        try:
            from google.api_core import exceptions as api_errors
            from google.api_core.retry import Retry
            from google.cloud import bigquery
        except ImportError:
            raise ConnectionFailed(
                f"{self.label}: the BigQuery client is not installed; "
                "pip install 'eval-pipeline[bigquery]'"
            ) from None
        self._bq = bigquery
        self._errors = api_errors
        self._retry_class = Retry
        try:
            self.target = parse_bigquery_url(url, database.schema)
        except ValueError as error:
            raise ConnectionFailed(f"{self.label}: {error}") from None
        self._timeout_s = 30.0
        self._lock = threading.Lock()
        self._job_id: str | None = None
        self._cancelled = threading.Event()
        self._client = self._open()

    # -- opening -------------------------------------------------------------------------

    def _retry(self, deadline_s: float) -> Any:
        """The client's retry on transient errors (5xx, a lost connection), ended after
        `deadline_s` instead of the client's ten minutes."""
        from google.cloud.bigquery.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_deadline(deadline_s).with_delay(0.2, 1.0)

    def _credentials(self) -> Any:
        target = self.target
        try:
            if target.credentials_json:
                from google.oauth2 import service_account

                return service_account.Credentials.from_service_account_info(
                    json.loads(target.credentials_json)
                )
            if target.credentials_path:
                from google.oauth2 import service_account

                return service_account.Credentials.from_service_account_file(
                    target.credentials_path
                )
            if target.api_endpoint or os.environ.get(EMULATOR_VARIABLE):
                # An emulator (or another endpoint) given no credentials: none are sent.
                from google.auth.credentials import AnonymousCredentials

                return AnonymousCredentials()
            import google.auth

            credentials, _ = google.auth.default()
            return credentials
        except Exception as error:  # a JSON, file or ADC problem: one line, never the key
            which = (
                "credentials_json"
                if target.credentials_json
                else f"credentials_path {target.credentials_path}"
                if target.credentials_path
                else "Application Default Credentials"
            )
            raise ConnectionFailed(
                f"{self.label}: cannot read the credentials ({which}): "
                f"{short_cause(_one_line(error), 300)}"
            ) from None

    def _open(self) -> Any:
        target = self.target
        options = {"api_endpoint": target.api_endpoint} if target.api_endpoint else None
        client = self._bq.Client(
            project=target.project,
            credentials=self._credentials(),
            location=target.location,
            client_options=options,
        )
        try:
            client.get_dataset(
                self._dataset_ref(),
                timeout=CONNECT_TIMEOUT_S,
                retry=self._retry(CONNECT_TIMEOUT_S),
            )
        except Exception as error:
            client.close()
            raise ConnectionFailed(
                f"{self.label}: cannot open dataset {target.project}.{target.dataset}: "
                f"{self._cause(error)}"
            ) from None
        return client

    def _dataset_ref(self) -> Any:
        return self._bq.DatasetReference(self.target.project, self.target.dataset)

    # -- one statement -------------------------------------------------------------------

    def begin_read_only(self, timeout_s: float) -> None:
        # No transaction to begin: the job is a query (checked by the dry run in `stream`)
        # and BigQuery stops it at its job timeout.
        self.end()
        self._timeout_s = timeout_s
        self._cancelled.clear()

    def _config(self, **extra: Any) -> Any:
        return self._bq.QueryJobConfig(
            default_dataset=self._dataset_ref(),
            use_legacy_sql=False,
            maximum_bytes_billed=self.target.maximum_bytes_billed,
            job_timeout_ms=max(1, int(self._timeout_s * 1000)),
            labels={"eval_pipeline": "sandbox"},
            **extra,
        )

    def dry_run(self, sql: str) -> Any:
        """BigQuery's own reading of `sql`, without running it (free): the job, whose
        `statement_type` and `total_bytes_processed` say what it is and will scan."""
        wait = self._timeout_s + NETWORK_GRACE_S
        return self._client.query(
            sql,
            job_config=self._config(dry_run=True, use_query_cache=False),
            location=self.target.location,
            timeout=wait,
            retry=self._retry(wait),
            job_retry=None,
        )

    def stream(self, sql: str, bounds: CellBounds | None = None) -> Stream:
        if sql == CATALOGUE:
            return self._catalogue()
        wait = self._timeout_s + NETWORK_GRACE_S
        try:
            preview = self.dry_run(sql)
            self._require_query(preview)
            job_id = f"eval_pipeline_{uuid.uuid4().hex}"
            with self._lock:
                self._job_id = job_id
            if self._cancelled.is_set():
                raise StatementTimeout(f"{self.label}: the statement was stopped")
            job = self._client.query(
                sql,
                job_config=self._config(),
                job_id=job_id,
                location=self.target.location,
                timeout=wait,
                retry=self._retry(wait),
                job_retry=None,
            )
            rows = job.result(page_size=PAGE_ROWS, timeout=wait, retry=self._retry(wait))
        except WarehouseError:
            self._abandon_job()
            raise
        except Exception as error:
            self._abandon_job()
            raise self._translate(error) from None
        pages = iter(rows.pages)
        width = len(rows.schema)
        first = self._next_page(pages, width)
        plans = plan_columns(rows.schema, first or [])
        names = [plan.name for plan in plans]
        stream = Stream(names, [plan.duckdb for plan in plans], iter(()))

        def batches() -> Iterator[pa.RecordBatch]:
            page = first
            while page is not None:
                if bounds is not None:
                    over = _first_row_over(page, bounds.row_bytes)
                    if over is not None:
                        stream.refused_row = True
                        page = [column[:over] for column in page]
                if page and page[0]:
                    try:
                        yield batch_of_columns(plans, page)
                    except ValueDoesNotFit as error:
                        raise StatementFailed(str(error)) from None
                if stream.refused_row:
                    self._abandon_job()
                    return
                page = self._next_page(pages, width)
            with self._lock:
                self._job_id = None  # read to its end: nothing to cancel

        stream.batches = batches() if plans else iter(())
        return stream

    def _next_page(self, pages: Iterator[Any], width: int) -> list[list] | None:
        """The next page of the result as one list of values per column, or None at its end."""
        if self._cancelled.is_set():
            raise StatementTimeout(f"{self.label}: the statement was stopped")
        try:
            page = next(pages)
            # The client keeps each REST page's values column by column too (what its own
            # `to_arrow` reads): read so, no row object is made per row.
            columns = getattr(page, "_columns", None)
            if columns is not None:
                return [list(column) for column in columns]
            rows = [tuple(row.values()) for row in page]
        except StopIteration:
            return None
        except WarehouseError:
            raise
        except Exception as error:
            raise self._translate(error) from None
        return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width

    def _require_query(self, preview: Any) -> None:
        kind = preview.statement_type or "?"
        if kind != _STATEMENT_QUERY:
            # The sandbox's rules refuse these first; BigQuery's own reading is the backstop.
            raise StatementFailed(
                f"BigQuery reads this as a {kind} statement, not a query: only queries run "
                "here (as in a read-only transaction)"
            )
        scanned = preview.total_bytes_processed or 0
        cap = self.target.maximum_bytes_billed
        if scanned > cap:
            raise StatementFailed(
                f"the query would scan {bytes_text(scanned)} (BigQuery's dry run), more than "
                f"the {bytes_text(cap)} one query may bill here (maximum_bytes_billed); "
                "select fewer columns or filter on the partitioning column"
            )

    def _catalogue(self) -> Stream:
        """The dataset's columns with table and column descriptions, from the tables API."""
        wait = self._timeout_s + NETWORK_GRACE_S
        rows: list[tuple] = []
        try:
            listed = self._client.list_tables(
                self._dataset_ref(), timeout=wait, retry=self._retry(wait)
            )
            for item in sorted(listed, key=lambda t: t.table_id):
                table = self._client.get_table(
                    item.reference, timeout=wait, retry=self._retry(wait)
                )
                for field in table.schema:
                    rows.append(
                        (
                            table.table_id,
                            field.name,
                            _type_text(field),
                            table.description or "",
                            field.description or "",
                        )
                    )
        except Exception as error:
            raise self._translate(error) from None
        names = ["table_name", "column_name", "data_type", "table_comment", "column_comment"]
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
        batch = pa.RecordBatch.from_arrays(
            [pa.array(list(values), pa.string()) for values in columns], names=names
        )
        return Stream(names, ["VARCHAR"] * len(names), iter([batch]))

    # -- stopping ------------------------------------------------------------------------

    def cancel(self) -> None:
        self._cancelled.set()
        self._abandon_job()

    def _abandon_job(self) -> None:
        """`jobs.cancel` for the job this session started and did not read to its end."""
        with self._lock:
            job_id, self._job_id = self._job_id, None
        if job_id is None:
            return
        with contextlib.suppress(Exception):  # already done, or never made
            self._client.cancel_job(
                job_id,
                location=self.target.location,
                timeout=CONNECT_TIMEOUT_S,
                retry=self._retry(CONNECT_TIMEOUT_S),
            )

    def end(self) -> None:
        self._abandon_job()

    def close(self) -> None:
        self._abandon_job()
        with contextlib.suppress(Exception):
            self._client.close()

    # -- errors --------------------------------------------------------------------------

    def _cause(self, error: BaseException) -> str:
        message = getattr(error, "message", None) or _one_line(error)
        # The client starts its message with the request ("POST https://…/jobs: ").
        text = _REQUEST.sub("", _one_line(message))
        return short_cause(_JOB_SUFFIX.sub("", text))

    def _translate(self, error: BaseException) -> WarehouseError:
        errors = self._errors
        text = self._cause(error)
        reasons = {e.get("reason") for e in getattr(error, "errors", None) or [] if e}
        if self._cancelled.is_set() or _is_timeout(error) or "timeout" in reasons:
            self._abandon_job()
            return StatementTimeout(f"{self.label}: the statement was stopped: {text}")
        if "bytesBilledLimitExceeded" in reasons or "limit for bytes billed" in text:
            return StatementFailed(
                f"{text} (maximum_bytes_billed is {bytes_text(self.target.maximum_bytes_billed)}"
                " per query here)"
            )
        if isinstance(error, errors.Unauthorized | errors.ServiceUnavailable | errors.RetryError):
            self.broken = True
            return ConnectionFailed(f"{self.label}: lost the connection: {text}")
        if isinstance(error, errors.GoogleAPICallError):
            return StatementFailed(text)
        self.broken = True
        return ConnectionFailed(f"{self.label}: {text}")


def dry_run_bytes(connection: BigQueryConnection, sql: str, timeout_s: float = 30.0) -> int:
    """The bytes `sql` will scan, by BigQuery's dry run (free).

    Raises:
        StatementFailed: BigQuery does not read it as a query, or rejects it.
    """
    connection.begin_read_only(timeout_s)
    try:
        preview = connection.dry_run(sql)
    except Exception as error:
        raise connection._translate(error) from None
    if (preview.statement_type or "?") != _STATEMENT_QUERY:
        raise StatementFailed(f"BigQuery reads it as a {preview.statement_type} statement")
    return int(preview.total_bytes_processed or 0)


def _type_text(field: Any) -> str:
    """A column's type as BigQuery's SQL writes it: STRUCT<a INT64>, ARRAY<STRING>, …"""
    kind = {"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL", "RECORD": "STRUCT"}.get(
        str(field.field_type).upper(), str(field.field_type).upper()
    )
    if kind == "STRUCT":
        kind = "STRUCT<" + ", ".join(f"{f.name} {_type_text(f)}" for f in field.fields) + ">"
    elif kind in ("NUMERIC", "BIGNUMERIC") and field.precision is not None:
        kind += f"({field.precision}" + (f", {field.scale})" if field.scale is not None else ")")
    return f"ARRAY<{kind}>" if field.mode == "REPEATED" else kind


def _is_timeout(error: BaseException) -> bool:
    import concurrent.futures

    import requests

    return isinstance(error, concurrent.futures.TimeoutError | requests.Timeout | TimeoutError)


def _first_row_over(columns: list[list], budget: int) -> int | None:
    """The index of the first row whose cells hold more than `budget` bytes, or None."""
    sizes = [0] * (len(columns[0]) if columns else 0)
    for column in columns:
        for i, value in enumerate(column):
            if value is not None:
                sizes[i] += len(value) if isinstance(value, str | bytes) else _nested_size(value)
    return next((i for i, size in enumerate(sizes) if size > budget), None)


def _nested_size(value: Any) -> int:
    return len(str(value)) if isinstance(value, dict | list) else 8


def _one_line(error: object) -> str:
    text = str(error)
    # The client appends the job's location and id on lines of their own.
    return " ".join(line.strip() for line in text.splitlines() if line.strip())

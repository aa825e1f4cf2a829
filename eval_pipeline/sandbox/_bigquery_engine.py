"""BigQuery as a warehouse engine: `google-cloud-bigquery` query jobs (`warehouses`), sqlglot's BigQuery dialect and BigQuery's dry run as the sandbox's rules, and the dry-run cost of the references shown before the first run."""

from __future__ import annotations

import contextlib
import re
from urllib.parse import unquote

from eval_pipeline.sandbox._bigquery_statements import require_bigquery_reading_statement
from eval_pipeline.sandbox._sandbox_errors import SandboxError
from eval_pipeline.suite import DatabaseConfig, Engine
from eval_pipeline.warehouses import (
    BIGQUERY_CATALOGUE,
    MAXIMUM_BYTES_BILLED,
    BigQueryConnection,
    StableCallables,
    WarehouseError,
    bytes_text,
    connect,
    dry_run_bytes,
    on_demand_usd,
)

__all__ = ["ENGINE", "nao_bigquery_url"]

#: A nao field holding an `{{ env() }}` template (nao_config.yaml's env calls, as read).
_ENV_TEMPLATE = re.compile(r"^\{\{ env\('[A-Za-z_][A-Za-z0-9_]*'\) \}\}$")


def _connect(database: DatabaseConfig) -> BigQueryConnection:
    return BigQueryConnection(database, database.resolve_url())


def _reading_statement(sql: str, stable: StableCallables) -> str:
    # BigQuery keeps no volatility marks (`stable` is empty); BigQuery's own reading of the
    # statement follows in the session, by a dry run before the job.
    return require_bigquery_reading_statement(sql)


def nao_bigquery_url(fields: dict[str, str]) -> str:
    """`bigquery://PROJECT/DATASET?…` from a nao BigQuery database's fields (nao's
    `BigQueryConfig`: project_id, dataset_id, credentials_path, credentials_json, location,
    max_query_size in GB; `sso` means Application Default Credentials, which is what no
    credentials give; partition_filters are for nao's previews and not read).

    Raises:
        KeyError: project_id or dataset_id is missing (queries here run in one dataset).
        ValueError: credentials_json written out in the file rather than read from the
            environment, or a max_query_size that is no number.
    """
    project, dataset = fields["project_id"], fields["dataset_id"]
    options: list[tuple[str, str]] = []
    for name in ("location", "credentials_path"):
        if fields.get(name):
            options.append((name, fields[name]))
    if fields.get("credentials_json"):
        if not _ENV_TEMPLATE.fullmatch(unquote(fields["credentials_json"])):
            raise ValueError(
                "credentials_json is a service account's key: read it from the environment "
                "(credentials_json: \"{{ env('GCP_CREDENTIALS_JSON') }}\") or give "
                "credentials_path, rather than write it in nao_config.yaml"
            )
        options.append(("credentials_json", fields["credentials_json"]))
    if fields.get("max_query_size"):
        try:
            gigabytes = float(unquote(fields["max_query_size"]))
        except ValueError:
            raise ValueError(
                f"max_query_size is gigabytes, got {unquote(fields['max_query_size'])!r}"
            ) from None
        options.append(("maximum_bytes_billed", str(max(1, int(gigabytes * 1e9)))))
    query = "&".join(f"{name}={value}" for name, value in options)
    return f"bigquery://{project}/{dataset}" + (f"?{query}" if query else "")


def _cost_preview(database: DatabaseConfig, references: list[str]) -> str | None:
    """One line before the first run: what one query may bill, and what the references
    will scan by BigQuery's dry run (free), with their on-demand price."""
    connection = connect(database)
    assert isinstance(connection, BigQueryConnection)
    cap = connection.target.maximum_bytes_billed
    scanned, unread = 0, 0
    try:
        for sql in references:
            try:
                scanned += dry_run_bytes(connection, require_bigquery_reading_statement(sql))
            except (WarehouseError, SandboxError):
                unread += 1  # its own run reports why
    finally:
        with contextlib.suppress(Exception):
            connection.close()
    default = (
        " (the default; set ?maximum_bytes_billed= in the URL)"
        if cap == MAXIMUM_BYTES_BILLED
        else ""
    )
    line = (
        f"database {database.name!r} (BigQuery): each query may bill at most "
        f"{bytes_text(cap)}{default}; the {len(references) - unread} reference "
        f"quer{'y' if len(references) - unread == 1 else 'ies'} will scan "
        f"{bytes_text(scanned)} by BigQuery's dry run "
        f"(≈ ${on_demand_usd(scanned):.4f} on demand, before the 10 MB minimum per "
        "query), per evaluation"
    )
    if unread:
        line += f"; {unread} could not be estimated"
    return line


ENGINE = Engine(
    name="bigquery",
    label="BigQuery",
    dialect="bigquery",
    connect=_connect,
    reading_statement=_reading_statement,
    url_schemes=("bigquery",),
    nao_type="bigquery",
    nao_url=nao_bigquery_url,
    identifier_quote="`",
    catalogue_sql=BIGQUERY_CATALOGUE,
    cost_preview=_cost_preview,
)

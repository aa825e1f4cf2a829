"""The `store:` block of eval_config.yaml: where the results tables live (default: the suite's .eval/)."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from eval_pipeline.suite._parse import FieldReader

__all__ = ["STORE_KEYS", "StoreConfig", "read_store"]

STORE_KEYS = ("url", "endpoint_url")

# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class StoreConfig:
    """An S3-compatible bucket holding every table and journal (docs/results-in-sql.md "Object storage").

    Args:
        url: `s3://bucket/prefix`; the prefix keeps several suites apart in one bucket.
        endpoint_url: an S3-compatible server (MinIO, moto, R2); None for AWS itself.
            Credentials never appear here: they come from the `AWS_*` environment.
    """

    url: str
    endpoint_url: str | None = None


def read_store(r: FieldReader, data: dict) -> StoreConfig | None:
    """The `store:` block; a bad value is a problem naming the field and what to write."""
    block = r.mapping(data, "store", "store", STORE_KEYS)
    if block is None:
        return None
    url = r.text(block, "url", "store.url", required=True)
    endpoint = r.text(block, "endpoint_url", "store.endpoint_url")
    problems = len(r.problems)
    if url is not None:
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme != "s3" or not _BUCKET.match(parts.hostname or ""):
            r.problem(
                "store.url",
                f"expected s3://<bucket>/<prefix>, got {url!r}; leave `store:` out to keep "
                "the results in the suite's .eval/ folder",
                r.line_of(block, "url"),
            )
        elif parts.username or parts.password or parts.query or parts.fragment:
            # A key written into the file would end up in the store's own paths and logs.
            r.problem(
                "store.url",
                "must be s3://<bucket>/<prefix> alone; credentials come from the AWS_* "
                "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never from the file",
                r.line_of(block, "url"),
            )
    if endpoint is not None:
        parts = urllib.parse.urlsplit(endpoint.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            r.problem(
                "store.endpoint_url",
                f"expected an http(s):// URL of an S3-compatible server, got {endpoint!r}",
                r.line_of(block, "endpoint_url"),
            )
        elif parts.username or parts.password:
            r.problem(
                "store.endpoint_url",
                "must not hold credentials; they come from the AWS_* environment",
                r.line_of(block, "endpoint_url"),
            )
    if url is None or len(r.problems) > problems:
        return None
    return StoreConfig(url=url.strip().rstrip("/"), endpoint_url=endpoint and endpoint.strip())

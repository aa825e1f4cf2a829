"""Store files on local disk or as objects in an S3-compatible bucket: the few operations the store needs.

A location is a `pathlib.Path` (local disk, today's behaviour, untouched) or a `upath.UPath`
over s3fs (a bucket). Objects are immutable: each is written whole by one PUT under a name
no other writer uses, so there is no rename and no lock; a writer killed mid-write leaves
no object at all. An append-only file (a journal) becomes a folder with one object per record.

The store's own reads and writes go through s3fs (fsspec's S3, behind `upath.UPath`, so the
code keeps its pathlib shape). DuckDB reads through an fsspec filesystem registered on its
connection: pyarrow's S3 client behind fsspec's `ArrowFSWrapper`, measured about twice as fast
as s3fs for the views' glob + read (benchmarks/bucket_filesystems.py, docs/results-in-sql.md "Object storage").
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import tempfile
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipeline.store._disk import writing_below
from eval_pipeline.store._unanswered import (
    BUCKET_ATTEMPTS,
    BUCKET_CONNECT_TIMEOUT_S,
    BUCKET_READ_TIMEOUT_S,
    answering,
    guarded,
    watch_client,
)

# Either a local Path or a UPath in the bucket (typed loosely: UPath is not a Path).
Location = Any


def is_remote(location: Location) -> bool:
    return not isinstance(location, Path)


def _options(endpoint_url: str | None) -> dict[str, Any]:
    # Listings are never cached: another worker's new file must show at the next listing.
    options: dict[str, Any] = {
        "use_listings_cache": False,
        "config_kwargs": {
            "connect_timeout": BUCKET_CONNECT_TIMEOUT_S,
            "read_timeout": BUCKET_READ_TIMEOUT_S,
            "retries": {"total_max_attempts": BUCKET_ATTEMPTS, "mode": "standard"},
        },
    }
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    return options


def bucket_location(url: str, endpoint_url: str | None) -> Location:
    """A bucket store's root; credentials come from the AWS_* environment (botocore)."""
    try:
        import s3fs  # noqa: F401  # the `s3` extra: only a bucket store needs it
        from upath import UPath
    except ImportError:
        raise RuntimeError(
            "store.url is an s3:// bucket, which needs the s3 extra: "
            "pip install 'eval-pipeline[s3]'"
        ) from None
    # fsspec caches one filesystem per options: every location of the store shares it.
    root = UPath(url, **_options(endpoint_url))
    root.fs.retries = 1  # s3fs retries on its own 5 times; botocore's attempts are enough
    if not getattr(root.fs, "_eval_no_expect", False):
        # botocore asks `Expect: 100-continue` for every upload, and aiohttp waits for the
        # 100 with no timeout at all: a silent endpoint held each write forever. Our PUTs
        # are small single objects; without the header the read timeout applies.
        root.fs.connect()
        root.fs.s3.meta.events.register_last("before-call.s3", _no_expect_continue)
        watch_client(root.fs.s3, endpoint_url)
        root.fs._eval_no_expect = True
    return root


def _no_expect_continue(params: dict[str, Any], **_kwargs: Any) -> None:
    params.get("headers", {}).pop("Expect", None)


@functools.cache
def _duckdb_filesystem(endpoint_url: str | None) -> Any:
    from fsspec.implementations.arrow import ArrowFSWrapper
    from pyarrow import fs as arrow_fs

    class ArrowS3(ArrowFSWrapper):
        protocol = "s3"  # DuckDB hands s3:// paths to the filesystem claiming the protocol

        # Every request DuckDB makes goes through these: a silent bucket costs one wait.
        def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
            return guarded(endpoint_url, functools.partial(super().info, path, **kwargs), path)

        def ls(self, path: str, detail: bool = False, **kwargs: Any) -> list[Any]:
            call = functools.partial(super().ls, path, detail=detail, **kwargs)
            return guarded(endpoint_url, call, path)

        def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            return guarded(
                endpoint_url, functools.partial(super()._open, path, mode, **kwargs), path
            )

    options: dict[str, Any] = {}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    if endpoint_url:
        parts = urllib.parse.urlsplit(endpoint_url)
        options["endpoint_override"] = parts.netloc + parts.path
        options["scheme"] = parts.scheme
    options["connect_timeout"] = BUCKET_CONNECT_TIMEOUT_S
    options["request_timeout"] = BUCKET_READ_TIMEOUT_S
    options["retry_strategy"] = arrow_fs.AwsStandardS3RetryStrategy(max_attempts=BUCKET_ATTEMPTS)
    # Credentials: pyarrow reads the AWS_* environment (and the usual AWS config) itself.
    return ArrowS3(arrow_fs.S3FileSystem(**options))


_REGISTERING = threading.Lock()


def register(connection: duckdb.DuckDBPyConnection, location: Location) -> None:
    """Let DuckDB read (glob, read_parquet) below a bucket location; nothing for local disk."""
    if not is_remote(location):
        return
    filesystem = _duckdb_filesystem(location.storage_options.get("endpoint_url"))
    # Connections to one database file in a process share its filesystems (DuckDB caches the
    # instance), and a second registration is an error: the models' runs open them at once.
    protocol = filesystem.protocol
    name = protocol if isinstance(protocol, str) else protocol[0]
    with _REGISTERING:
        if not connection.filesystem_is_registered(name):
            connection.register_filesystem(filesystem)


def fsspec_spec(location: Location) -> dict[str, Any]:
    """How another process builds the same filesystem (`fsspec.filesystem(**spec)`): the
    form dbt-duckdb's `filesystems` takes. Never holds a credential."""
    return {"fs": location.fs.protocol[0], **location.storage_options}


def write_parquet(
    table: pa.Table | Callable[[], Iterable[pa.RecordBatch]],
    path: Location,
    schema: pa.Schema | None = None,
) -> None:
    """Write `table` so readers see the whole file or none of it. `table` may instead be
    what yields its rows a batch at a time (with their `schema`): a row group each, and
    only one batch in memory at once."""

    def write(sink: Any) -> None:
        if isinstance(table, pa.Table):
            pq.write_table(table, sink, compression="zstd")
            return
        assert schema is not None, "batches are written with their schema"
        with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
            for batch in table():
                writer.write_batch(batch)

    if is_remote(path):
        # Serialized first, then one PUT: an error or kill mid-write uploads nothing.
        buffer = io.BytesIO()
        write(buffer)
        with answering(path):
            path.fs.pipe_file(path.path, buffer.getvalue())
        return
    # A name of its own: two processes may write the same file at once (the schema files).
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with writing_below(path.parent), _removed_on_error(temporary):
        for attempt in range(3):
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                write(temporary)
                break
            except FileNotFoundError:
                # Compaction removed the (empty) folder between the mkdir and the write
                # (`remove_empty_folders`); once the temporary file is in it, it stays.
                if attempt == 2:
                    raise
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
    os.replace(temporary, path)  # readers see the whole file or none of it


@contextlib.contextmanager
def _removed_on_error(temporary: Path) -> Iterator[None]:
    """A half-written temporary file (a full disk) is removed, not left to fill it more."""
    try:
        yield
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def put_local_file(local: Path, path: Location) -> None:
    """Move a finished local file to `path` (a rename locally, an upload to a bucket)."""
    if is_remote(path):
        with answering(path):
            path.fs.put_file(str(local), path.path)
        local.unlink()
        return
    with open(local, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(local, path)


def staging_file(path: Location) -> Path:
    """A local temporary name for a file that ends up at `path` (`put_local_file`)."""
    if is_remote(path):
        handle, name = tempfile.mkstemp(suffix=f".{path.name}")
        os.close(handle)
        return Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


def write_text(path: Location, text: str) -> None:
    """Replace a small text file whole (one PUT in a bucket)."""
    if is_remote(path):
        with answering(path):
            path.fs.pipe_file(path.path, text.encode())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def read_table(path: Location, **options: Any) -> pa.Table:
    if is_remote(path):
        # One GET for the whole (small) file beats pyarrow's ranged reads over s3fs ~4x.
        with answering(path):
            data = path.fs.cat_file(path.path)
        return pq.read_table(io.BytesIO(data), **options)
    return pq.read_table(path, **options)


def parquet_file(path: Location) -> pq.ParquetFile:
    if is_remote(path):
        return pq.ParquetFile(path.path, filesystem=path.fs)
    return pq.ParquetFile(path)


def read_schema(path: Location) -> pa.Schema:
    return parquet_file(path).schema_arrow


def files_below(folder: Location, suffix: str = ".parquet") -> list[Location]:
    """Every file below `folder` whose name ends with `suffix` and does not start with '.'."""
    if is_remote(folder):
        try:
            with answering(folder):
                keys = folder.fs.find(folder.path)
        except FileNotFoundError:
            return []
        return sorted(
            folder / os.path.relpath(k, folder.path)
            for k in keys
            if k.endswith(suffix) and not k.rsplit("/", 1)[-1].startswith(".")
        )
    found = []
    for parent, _, names in os.walk(folder):
        found += [Path(parent) / n for n in names if n.endswith(suffix) and n[0] != "."]
    return sorted(found)


def children(folder: Location) -> list[Location]:
    """The entries right inside `folder` (files and, in a bucket, sub-prefixes)."""
    if is_remote(folder):
        try:
            with answering(folder):
                names = folder.fs.ls(folder.path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(folder / n.rstrip("/").rsplit("/", 1)[-1] for n in names)
    try:
        return sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        # None yet, or a partition folder compaction emptied and removed (`remove_empty_folders`).
        return []


def remove(paths: Iterable[Location]) -> None:
    """Delete files (and, in a bucket, record folders); a missing one is no error."""
    for path in paths:
        if is_remote(path):
            with contextlib.suppress(FileNotFoundError), answering(path):
                path.fs.rm(path.path, recursive=True)
        else:
            path.unlink(missing_ok=True)


def remove_empty_folders(folder: Location) -> None:
    """Remove every empty folder below `folder` (not `folder` itself), deepest first.

    Compaction empties a year of partition folders: left in place, every `**` glob of the
    views and every listing of the store (`files_below`) walks them all, seconds over 12k
    folders. A writer recreates its folder (`write_parquet`). A bucket has no folders."""
    if is_remote(folder):
        return
    for parent, _, _ in os.walk(folder, topdown=False):
        if parent != str(folder):
            with contextlib.suppress(OSError):  # not empty (written meanwhile): kept
                os.rmdir(parent)


def move(source: Location, target: Location) -> bool:
    """Move a file; False when it was gone (moved by someone else first)."""
    if is_remote(source):
        try:
            with answering(source):
                source.fs.mv(source.path, target.path)
        except FileNotFoundError:
            return False
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(source, target)
    except FileNotFoundError:
        return False
    return True


# Append-only record files in a bucket: `<file>/<UTC stamp>_<id>.json`, one object per record.


def record_objects(path: Location) -> list[Location]:
    """A bucket record file's record objects, oldest first."""
    try:
        with answering(path):
            names = path.fs.ls(path.path, detail=False)
    except FileNotFoundError:
        return []
    return [path / n.rsplit("/", 1)[-1] for n in sorted(names) if n.endswith(".json")]


def append_record(path: Location, lines: str) -> None:
    """Add records (JSON lines, each ending in a newline) to an append-only record file,
    durably: in a bucket, as one object, there whole or not at all."""
    if is_remote(path):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        with answering(path):
            path.fs.pipe_file(f"{path.path}/{stamp}_{uuid.uuid4().hex[:8]}.json", lines.encode())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(lines)


def record_lines(path: Location) -> Iterator[str]:
    """The lines of a record file (local: its lines; bucket: those of its objects in turn)."""
    if is_remote(path):
        for record in record_objects(path):
            try:
                with answering(record):
                    text = record.fs.cat_file(record.path).decode("utf-8", errors="replace")
            except FileNotFoundError:
                continue  # removed meanwhile
            # Split at newlines alone, as a local file's lines are: JSON escapes them in its
            # strings, not the other line separators str.splitlines() knows.
            yield from (line + "\n" for line in text.split("\n") if line)
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        yield from handle


def last_modified(path: Location) -> datetime | None:
    """When a bucket record file last got a record (None: it has none)."""
    moments = []
    try:
        with answering(path):
            entries = path.fs.ls(path.path, detail=True)
    except FileNotFoundError:
        return None
    for entry in entries:
        moment = entry.get("LastModified")
        if isinstance(moment, datetime):
            moments.append(moment)
    return max(moments) if moments else None

"""A damaged file of the day being evaluated, through the real `eval-pipeline test`: the file is
set aside and named once, what it held is rebuilt, and the command exits as the verdicts say,
on the local store and on a bucket alike (both go through `store._damage`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import s3fs

from eval_pipeline.store import StateFolder, fetch_read_only
from eval_pipeline.suite import load_config
from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY, set_store, write_suite
from eval_pipeline_tests.store.buckets import Bucket

pytestmark = pytest.mark.slow

WARNING = "damaged store file set aside"

#: What each table holds after an evaluation of the suite, in columns a rebuild keeps as they
#: were (not the moment a row was written, nor a rerun's timings).
CONTENT = {
    "grades": "SELECT model, name, attempt, status, passed FROM grades ORDER BY ALL",
    "model_summaries": "SELECT model, run_date, total, passed, failed FROM model_summaries",
    "agent_runs": "SELECT model, name, attempt, status, answer FROM agent_runs ORDER BY ALL",
    "tool_calls": "SELECT model, name, attempt, call_index, tool FROM tool_calls ORDER BY ALL",
}


def damage(data: bytes, how: str) -> bytes:
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "garbage":
        return b"\x00not parquet\xff" * 64
    return b""  # zero length


def day_files(root: Path, table: str) -> list[Path]:
    folder = root / ".eval" / "store" / table / f"date={DAY}"
    return sorted(folder.rglob("*.parquet"))


def content(root: Path) -> dict[str, list[tuple]]:
    """The tables as `eval-pipeline sql` reads them (its query function: a command costs
    seconds of start-up, four per check)."""
    layout = StateFolder.of(load_config(root))
    return {table: fetch_read_only(layout, sql)[1] for table, sql in CONTENT.items()}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A suite evaluated on DAY (local store). Each test damages the newest file of a table,
    which its own rerun rebuilds: the next one starts from a complete evaluation again."""
    root = write_suite(tmp_path_factory.mktemp("damaged-day") / "suite")
    first = run_cli("test", "--date", DAY, cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    return root


@pytest.mark.parametrize("how", ["truncated", "garbage", "zero length"])
@pytest.mark.parametrize("table", ["model_summaries", "grades", "agent_runs", "tool_calls"])
def test_a_damaged_file_of_the_day_is_set_aside_and_rebuilt(evaluated, table: str, how: str):
    root, before = evaluated, content(evaluated)
    *older, path = day_files(root, table)  # the last is the partition's current rows
    original = path.read_bytes()
    path.write_bytes(damage(original, how))

    # What the issue saw first: `sql` answers from the copy published before the damage.
    assert run_cli("sql", f"SELECT count(*) FROM {table}", cwd=root).returncode == 0
    again = run_cli("test", "--date", DAY, cwd=root)
    no_traceback(again)
    assert again.returncode == 0, again.stdout + again.stderr  # every verdict passes
    assert "4/4 passed" in again.stdout
    named = [line for line in again.stderr.splitlines() if WARNING in line]
    assert len(named) == 1, again.stderr
    assert path.relative_to(root / ".eval").as_posix() in named[0]
    assert f"table {table}" in named[0]
    assert f"eval-pipeline test --date {DAY} rebuilds it" in named[0]
    # The runs come from the partition's previous runs file, if any (the rebuilds of the tests
    # before wrote some), else from the one intact (`test_runs_whose_only_file_…`: asked again).
    lost = table == "agent_runs" and not older
    assert ("4 agent run(s) executed" if lost else "No agent run executed") in again.stdout

    kept = root / ".eval" / "quarantine" / path.relative_to(root / ".eval" / "store")
    assert kept.read_bytes() == damage(original, how)  # set aside as found
    assert not path.exists() and day_files(root, table)[-1].name > path.name  # rebuilt
    assert content(root) == before  # every table holds what it held
    check = run_cli("store", "check", cwd=root)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 partition(s) to rerun" in check.stdout


def test_runs_whose_only_file_is_damaged_are_asked_again(tmp_path: Path):
    root = write_suite(tmp_path / "suite")
    assert run_cli("test", "--date", DAY, cwd=root).returncode == 0
    before = content(root)
    (path,) = day_files(root, "agent_runs")
    path.write_bytes(b"")
    again = run_cli("test", "--date", DAY, cwd=root)
    no_traceback(again)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "4 agent run(s) executed, 0 reused." in again.stdout
    assert len([line for line in again.stderr.splitlines() if WARNING in line]) == 1
    assert content(root) == before


def test_a_damaged_object_of_a_bucket_store_is_set_aside_and_rebuilt(
    bucket: Bucket, tmp_path: Path
):
    root = write_suite(tmp_path / "suite")
    set_store(root, bucket.store_config)
    first = run_cli("test", "--date", DAY, cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    before = content(root)
    (key,) = [
        k
        for k in bucket.object_keys()
        if k.startswith(f"store/model_summaries/date={DAY}/") and "/_" not in k
    ]
    objects = s3fs.S3FileSystem(endpoint_url=bucket.endpoint_url, use_listings_cache=False)
    objects.pipe_file(f"{bucket.name}/{bucket.prefix}/{key}", b"")

    again = run_cli("test", "--date", DAY, cwd=root)
    no_traceback(again)
    assert again.returncode == 0, again.stdout + again.stderr
    named = [line for line in again.stderr.splitlines() if WARNING in line]
    assert len(named) == 1 and key in named[0], again.stderr
    assert content(root) == before
    keys = bucket.object_keys()
    assert key not in keys and f"quarantine/{key.removeprefix('store/')}" in keys
    records = [k for k in keys if k.startswith("quarantine/records.jsonl/")]
    assert json.loads(bucket.read(records[0]))["table"] == "model_summaries"

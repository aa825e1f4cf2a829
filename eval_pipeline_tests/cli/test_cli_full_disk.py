"""A suite on a device that fills up (a 1 MB tmpfs, mounted for the test: it needs root),
through the real `eval-pipeline test`: one line names the store's folder and says the disk is
full, exit 3, and every file the store kept still reads; with room again, the rerun passes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eval_pipeline_tests.cli.console import no_traceback, run_cli_subprocess
from eval_pipeline_tests.cli.replay_suite import DAY, write_suite

pytestmark = pytest.mark.slow


@pytest.fixture
def small_device(tmp_path: Path) -> Iterator[Path]:
    """A folder on a tmpfs of its own, 1 MB: the suite's files fit, its results do not."""
    folder = tmp_path / "device"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        # Lazily: the command's Dagster recorder may still have the suite as its folder.
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_ends_with_one_line_naming_the_store_folder(small_device: Path):
    root = write_suite(small_device / "suite")
    full = run_cli_subprocess("test", "--date", DAY, cwd=root)
    no_traceback(full)
    assert full.returncode == 3, full.stdout + full.stderr
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, full.stderr
    assert "no space left on the device holding" in errors[0], errors
    assert str(root / ".eval") in errors[0] and "the disk is full" in errors[0], errors

    store = root / ".eval"
    assert not [p.name for p in store.rglob("*.tmp*")]  # no half-written file left behind
    for path in (store / "store").rglob("*.parquet"):
        pq.read_table(path)  # every stored file reads whole

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_device)], check=True)
    again = run_cli_subprocess("test", "--date", DAY, cwd=root)
    assert again.returncode == 0, again.stdout + again.stderr

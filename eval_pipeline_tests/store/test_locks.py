"""The store's locks and layout: the seam an object-storage store replaces, as its contract."""

from __future__ import annotations

import threading
from datetime import date
from pathlib import Path

from eval_pipeline.store import (
    StateFolder,
    file_lock,
    reading_files,
    try_file_lock,
    updating_partition,
)
from eval_pipeline.store._files import (  # the unit itself: a journal left by a dead writer
    Journal,
    abandoned_journals,
)
from eval_pipeline.store._locks import (  # the unit itself: which locks exclude which
    compaction_lock,
    deleting_files,
    publishing_lock,
)

DAY = date(2026, 6, 1)


def test_an_exclusive_lock_keeps_out_every_other_holder(tmp_path: Path):
    path = tmp_path / "deep" / "folder" / "x.lock"  # folders are created
    with file_lock(path):
        with try_file_lock(path) as held:
            assert not held
        with try_file_lock(path, shared=True) as held:
            assert not held
    with try_file_lock(path) as held:
        assert held


def test_shared_locks_coexist_and_keep_out_an_exclusive_one(tmp_path: Path):
    path = tmp_path / "readers.lock"
    with file_lock(path, shared=True), try_file_lock(path, shared=True) as also_shared:
        assert also_shared
        with try_file_lock(path) as exclusive:
            assert not exclusive


def test_a_waiting_lock_gets_the_lock_once_its_holder_lets_go(tmp_path: Path):
    path = tmp_path / "x.lock"
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with file_lock(path):
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    with try_file_lock(path, wait_s=0.1) as held:
        assert not held  # waited its 0.1 s, then gave up
    threading.Timer(0.2, release.set).start()
    with try_file_lock(path, wait_s=10) as held:
        assert held and release.is_set()  # taken once the holder let go, before its 10 s
    holder.join()


def test_the_store_locks_are_the_shapes_their_users_rely_on(tmp_path: Path):
    layout = StateFolder(tmp_path / ".eval")
    # Compaction deletes files only while no reader holds the readers lock.
    with (
        reading_files(layout),
        reading_files(layout),
        deleting_files(layout, wait_s=0.0) as may_delete,
    ):
        assert not may_delete
    with deleting_files(layout, wait_s=0.0) as may_delete:
        assert may_delete
    # One compaction at a time; the others skip at once.
    with compaction_lock(layout) as first, compaction_lock(layout) as second:
        assert first and not second
    # A partition's writers take turns; other partitions never wait for them.
    with updating_partition(layout, "openai:gpt-4.1", DAY):
        with try_file_lock(layout.partition_lock_file("openai:gpt-4.1", DAY)) as held:
            assert not held
        with try_file_lock(layout.partition_lock_file("openai:gpt-4.1-mini", DAY)) as held:
            assert held
    with publishing_lock(layout), try_file_lock(layout.publishing_lock_file) as held:
        assert not held


def test_a_journal_being_written_is_not_abandoned_and_a_closed_one_is(tmp_path: Path):
    layout = StateFolder(tmp_path / ".eval")
    path = layout.journal_path("agent_runs", "openai:gpt-4.1", DAY, "m1")
    with Journal(path) as journal:
        journal.append({"key": "k"})
        assert abandoned_journals([path]) == []
    assert abandoned_journals([path]) == [path]
    assert abandoned_journals([path.with_name("gone.jsonl")]) == []


def test_every_path_of_the_layout_is_below_the_state_folder(tmp_path: Path):
    layout = StateFolder(tmp_path / ".eval")
    properties = [
        name
        for name in dir(StateFolder)
        if isinstance(getattr(StateFolder, name), property)
        and name not in {"root", "remote", "location"}
    ]
    paths = [getattr(layout, name) for name in properties]
    paths += [
        layout.report_file(DAY),
        layout.partition_lock_file("replay:demo/x", DAY),
        layout.journal_path("grades", "replay:demo/x", DAY, "m1"),
        layout.partition_dir("grades", model="replay:demo/x", run_date=DAY),
    ]
    assert {"reports_dir", "logs_dir", "dagster_home", "locks_dir", "quarantine_dir"} <= set(
        properties
    )
    for path in paths:
        assert path.is_relative_to(layout.root), path
    # Model ids hold ':' and '/': each stays one folder name.
    assert layout.partition_lock_file("replay:demo/x", DAY).parent.parent == layout.locks_dir

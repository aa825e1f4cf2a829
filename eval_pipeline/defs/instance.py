"""Which Dagster instance an evaluation records in: the suite's own, the same one the UI shows."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.pipeline import DAGSTER_HOME_ENV, default_instance_yaml, instance_home
from eval_pipeline.store import file_lock

if TYPE_CHECKING:
    import dagster as dg

__all__ = [
    "DAGSTER_HOME_ENV",
    "default_instance_yaml",
    "instance_home",
    "open_instance",
    "write_workspace",
]

# The code location the UI loads: the repository's workspace.yaml says the same (a test
# keeps them equal), so `eval-pipeline ui` and `dagster dev` / `dg dev` show one location
# and the daemon keeps one schedule state.
LOCATION_NAME = "eval_pipeline"
WORKSPACE_YAML = f"""\
# Written by `eval-pipeline ui`; the repository's workspace.yaml loads the same location.
load_from:
  - python_module:
      module_name: eval_pipeline.definitions
      location_name: {LOCATION_NAME}
"""


def write_workspace(home: Path) -> Path:
    """`<home>/workspace.yaml`, the workspace `eval-pipeline ui` starts Dagster with."""
    path = home / "workspace.yaml"
    if not path.exists() or path.read_text(encoding="utf-8") != WORKSPACE_YAML:
        path.write_text(WORKSPACE_YAML, encoding="utf-8")
    return path


def open_instance(home: Path, *, command_line: bool = False) -> dg.DagsterInstance:
    """The instance in `home` (`$DAGSTER_HOME` set to it). Opening one creates its SQLite
    storage the first time, which two evaluations started together must not do at once.

    `command_line=True` (an evaluation in this process) records runs, events and
    materializations as always, but not the steps' raw stdout/stderr: capturing them starts
    `tail` and watcher processes for every step, and an evaluation's steps log as events.
    """
    import dagster as dg

    # The lock sits in the home, not the store's locks folder: `$DAGSTER_HOME` may be shared
    # by several suites, and it is the home's storage that must be created once.
    with file_lock(home / ".open.lock"):
        if not command_line:
            return dg.DagsterInstance.get()
        # Not public: an instance from a folder with overrides (no public constructor takes
        # them); defs/test_private_dagster_api.py pins the Dagster minor it was checked on.
        from dagster._core.instance.ref import InstanceRef

        overrides = {
            "compute_logs": {
                "module": "dagster._core.storage.noop_compute_log_manager",
                "class": "NoOpComputeLogManager",
            }
        }
        instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))
    _trust_stamped_shards(instance)
    return instance


def _trust_stamped_shards(instance: dg.DagsterInstance) -> None:
    """Tell SQLite's event log storage that the shards every record writes to (the asset
    index, the runless events) are already made: before its first write to a shard, the
    storage asks Alembic for its migrations' head (it parses every migration script, about
    50 ms each time) only to find the shard stamped, and does nothing then. A shard that
    holds no stamp is left to the storage, which makes it as always."""
    # Not public: the storage's folder and its set of shards made in this process
    # (defs/test_private_dagster_api.py pins both with the Dagster minor checked on).
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
        INDEX_SHARD_NAME,
        SqliteEventLogStorage,
    )

    storage = instance.event_log_storage
    if not isinstance(storage, SqliteEventLogStorage):
        return
    for shard in (INDEX_SHARD_NAME, ""):
        if _stamped(Path(storage.path_for_shard(shard))):
            storage._initialized_dbs.add(shard)


def _stamped(database: Path) -> bool:
    """Whether the SQLite file holds an Alembic revision (what Dagster's check reads)."""
    if not database.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as connection:
            return (
                connection.execute("SELECT version_num FROM alembic_version").fetchone() is not None
            )
    except sqlite3.Error:
        return False

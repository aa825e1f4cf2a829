"""Which Dagster instance an evaluation records in: the suite's own, the same one the UI shows."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
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
    "waiting_on_a_daemon",
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
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))


# A queued run normally starts within seconds of a running daemon's dequeue loop; a minute
# without a start, with no daemon heartbeat either, is a queue nobody serves.
QUEUE_PATIENCE_S = 60.0


def waiting_on_a_daemon(
    instance: dg.DagsterInstance, home: Path, *, patience_s: float | None = None
) -> str | None:
    """One line for a user whose runs launched from the UI (or a schedule, a backfill) sit in
    the instance's queue while no Dagster daemon runs to start them, or None. The UI shows
    them as "Queued" and nothing else; the command line, which needs no daemon, says why."""
    import dagster as dg

    patience_s = QUEUE_PATIENCE_S if patience_s is None else patience_s
    waited = datetime.now(UTC) - timedelta(seconds=patience_s)
    queued = instance.get_runs(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED], created_before=waited), limit=1000
    )
    if not queued:
        return None
    alive = time.time() - patience_s
    if any(beat.timestamp > alive for beat in instance.get_daemon_heartbeats().values()):
        return None
    return (
        f"{len(queued)} run(s) in the Dagster instance {home} have been queued for over "
        f"{patience_s:.0f} s and no Dagster daemon is running, so none will start: "
        "`eval-pipeline ui` runs one, or start `dagster-daemon run` on this instance"
    )

"""Which Dagster instance an evaluation records in: the suite's own, the same one the UI shows."""

from __future__ import annotations

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

        _parse_migrations_once()
        overrides = {
            "compute_logs": {
                "module": "dagster._core.storage.noop_compute_log_manager",
                "class": "NoOpComputeLogManager",
            }
        }
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))


_PARSED: dict[str, object] = {}


def _parse_migrations_once() -> None:
    """Have Alembic parse Dagster's storage migrations once in this process. Dagster checks
    each SQLite database it opens (the runs, the schedules, each event log shard) against
    the head of its migrations, and Alembic's `ScriptDirectory.from_config` parses every
    migration script for each check: about 50 ms, four or five times in a process that
    records one evaluation. The scripts do not change while a process runs."""
    from alembic.script import ScriptDirectory

    if getattr(ScriptDirectory.from_config, "_eval_pipeline_once", False):
        return
    parse = ScriptDirectory.from_config

    def from_config(config, *args, **kwargs):
        where = config.get_main_option("script_location")
        if args or kwargs or where is None:
            return parse(config, *args, **kwargs)
        if where not in _PARSED:
            _PARSED[where] = parse(config)
        return _PARSED[where]

    from_config._eval_pipeline_once = True  # type: ignore[attr-defined]
    ScriptDirectory.from_config = staticmethod(from_config)  # type: ignore[method-assign]

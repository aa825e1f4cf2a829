"""Where an evaluation's Dagster instance lives and whether its queue is served, known without importing Dagster."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

from eval_pipeline.store import StateFolder
from eval_pipeline.suite import SuiteConfig

DAGSTER_HOME_ENV = "DAGSTER_HOME"


def instance_home(config: SuiteConfig, *, create: bool = True) -> Path:
    """`$DAGSTER_HOME` when set, else `<suite>/.eval/dagster_home`, created with a `dagster.yaml`.

    Keeping the instance beside the results means a suite copied elsewhere keeps its run
    history with it, and `eval-pipeline ui` opens the instance `eval-pipeline test` wrote to.
    `create=False` only names it, for a reader that must leave no trace when it finds none.
    """
    configured = os.environ.get(DAGSTER_HOME_ENV)
    home = Path(configured).resolve() if configured else StateFolder(config.state_path).dagster_home
    if not create:
        return home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        target.write_text(default_instance_yaml(), encoding="utf-8")
    return home


def default_instance_yaml() -> str:
    """The instance settings shipped with the package (`eval_pipeline/dagster.yaml`, the one copy)."""
    return resources.files("eval_pipeline").joinpath("dagster.yaml").read_text(encoding="utf-8")


#: How long a run may sit queued before a command says no daemon starts it: a daemon takes
#: a run within seconds, and one launched from the UI a moment ago is not stuck yet.
QUEUE_PATIENCE_S = 60.0


def queued_unserved(home: Path, *, patience_s: float | None = None) -> str | None:
    """One line for a user whose runs launched from the UI (or a schedule, a backfill) sit in
    the instance's queue while no Dagster daemon runs to start them, or None. The UI shows
    them as "Queued" and nothing else; the command line, which needs no daemon, says why.

    Read from the instance's own SQLite run storage (`history/runs.db`, where Dagster keeps
    the runs and the daemons' heartbeats unless the instance names another storage), in a
    few milliseconds and without importing Dagster; an instance with another storage (a
    deployment's PostgreSQL, served by its own daemon) gets no line.
    """
    runs = home / "history" / "runs.db"
    if not runs.is_file():
        return None
    patience_s = QUEUE_PATIENCE_S if patience_s is None else patience_s
    # Dagster writes both timestamps as UTC text, 'YYYY-MM-DD HH:MM:SS.ffffff'.
    since = (datetime.now(UTC) - timedelta(seconds=patience_s)).strftime("%Y-%m-%d %H:%M:%S.%f")
    try:
        with contextlib.closing(sqlite3.connect(f"{runs.as_uri()}?mode=ro", uri=True)) as db:
            (queued,) = db.execute(
                "SELECT count(*) FROM runs WHERE status = 'QUEUED' AND create_timestamp < ?",
                (since,),
            ).fetchone()
            if not queued:
                return None
            (beat,) = db.execute("SELECT max(timestamp) FROM daemon_heartbeats").fetchone()
    except sqlite3.Error:  # a storage of another Dagster version: no line rather than a wrong one
        return None
    if beat is not None and beat > since:
        return None
    return (
        f"{queued} run(s) in the Dagster instance {home} have been queued for over "
        f"{patience_s:.0f} s and no Dagster daemon is running, so none will start: "
        "`eval-pipeline ui` runs one, or start `dagster-daemon run` on this instance"
    )

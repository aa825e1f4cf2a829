"""examples/two_suites under `dg dev`, as a Dagster team runs its project: the real webserver and
daemon, through GraphQL. Both suites load prefixed, with their owners; their sensors observe
the suites' files without a run; the team's own run of its own asset is left untagged."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline_tests.pipeline.services import BIN, LAUNCH_RUN, graphql, stop_group, wait_for
from eval_pipeline_tests.warehouses.servers import free_port

pytestmark = pytest.mark.slow  # starts `dg dev`: a webserver, a daemon and a code server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_suites"

ASSETS = """
{ assetNodes {
    assetKey { path } isObservable groupName
    owners { ... on TeamAssetOwner { team } ... on UserAssetOwner { email } }
} }
"""
OBSERVED = """
query($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset { assetObservations(limit: 1) { tags { key value } } }
  }
}
"""
RUNS = """
{ runsOrError { ... on Runs { results { runId status assetSelection { path } } } } }
"""
RUN = """
query($runId: ID!) {
  runOrError(runId: $runId) { ... on Run { status tags { key value } } }
}
"""
LOADED = """
{ workspaceOrError { ... on Workspace { locationEntries {
    locationOrLoadError { __typename ... on PythonError { message } }
} } } }
"""


def _loaded(base: str) -> bool:
    entries = graphql(base, LOADED)["workspaceOrError"]["locationEntries"]
    states = [entry["locationOrLoadError"] for entry in entries]
    assert not any(s and s["__typename"] == "PythonError" for s in states), states
    return bool(states) and all(s and s["__typename"] == "RepositoryLocation" for s in states)


def _owner(node: dict) -> list[str]:
    """The owners as they were written: GraphQL gives a team without its `team:`."""
    return [f"team:{o['team']}" if "team" in o else o["email"] for o in node["owners"]]


def test_dg_dev_serves_both_suites_and_leaves_the_teams_asset_to_dagster(
    tmp_path: Path, history_dbt_target: Path
):
    project = Path(shutil.copytree(EXAMPLE, tmp_path / "two_suites"))
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dg_dev.log"
    command = [str(BIN / "dg"), "dev", "--use-active-venv", "--host", "127.0.0.1"]
    with open(log, "w") as output:
        # its own process group: `dg dev` starts the webserver, the daemon and code servers
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            cwd=project,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            "dg dev did not load the project", lambda: _loaded(base), timeout_s=300, logs=[log]
        )

        nodes = {
            "/".join(node["assetKey"]["path"]): node for node in graphql(base, ASSETS)["assetNodes"]
        }
        for suite, owners in (
            ("sales", ["team:sales-analytics"]),
            ("support", ["support-lead@example.com"]),
        ):
            own = {key: node for key, node in nodes.items() if key.startswith(f"{suite}/")}
            assert {
                f"{suite}/agent_runs",
                f"{suite}/grades",
                f"{suite}/history/regressions",
            } <= set(own)
            assert all(_owner(node) == owners for node in own.values()), suite
            assert all(node["groupName"].startswith(f"{suite}_") for node in own.values())
            assert nodes[f"{suite}/test_files"]["isObservable"]
        assert _owner(nodes["weekly_kpis"]) == []

        def observed() -> bool:
            reply = graphql(base, OBSERVED, {"path": ["sales", "test_files"]})["assetOrError"]
            return bool(reply["assetObservations"])

        # the daemon's first tick of sales__watch_suite_files observes the files, with no run
        wait_for("the watch sensor observed nothing", observed, timeout_s=180, logs=[log])

        # the team materializes its own asset from the UI: a run of a job of neither suite
        launched = graphql(
            base,
            LAUNCH_RUN,
            {
                "params": {
                    "selector": {
                        "repositoryLocationName": "two_suites",
                        "repositoryName": "__repository__",
                        "jobName": "__ASSET_JOB",
                        "assetSelection": [{"path": ["weekly_kpis"]}],
                    },
                    "runConfigData": {},
                }
            },
        )["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]

        def finished() -> dict | None:
            run = graphql(base, RUN, {"runId": run_id})["runOrError"]
            return run if run["status"] in {"SUCCESS", "FAILURE", "CANCELED"} else None

        wait_for("the team's run did not finish", finished, timeout_s=180, logs=[log])
        time.sleep(35)  # a round of every sensor's ticks after it: tag_run_launcher's included
        run = finished()
        assert run is not None and run["status"] == "SUCCESS", run
        tags = {tag["key"]: tag["value"] for tag in run["tags"]}
        assert not [key for key in tags if key.startswith("eval_pipeline/")], tags
        # and nothing else ran: no suite starts a run on its own at start-up
        runs = graphql(base, RUNS)["runsOrError"]["results"]
        assert [r["runId"] for r in runs] == [run_id], runs
    finally:
        stop_group(process)

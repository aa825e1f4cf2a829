"""What the Dagster UI shows after eval_config.yaml is edited, with its webserver and daemon running.

Both models are evaluated; then `dagster-webserver` and `dagster-daemon` run over the suite's
instance, as a deployment runs them, and the UI's GraphQL is asked what it shows. A
tolerance edit turns every grade unsynced by `grading_rules` (re-read by the
`watch_suite_files` sensor) and leaves the runs as they were; a settings edit of one model
turns that model's runs unsynced by `model_settings`, and the other model's runs stay
fresh. Every job the webserver lists has a name of ours.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline.defs.names import UNNAMED
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.defs.watch import observe_settings
from eval_pipeline.suite import load_config
from eval_pipeline_tests.pipeline.services import dagster_services, graphql, wait_for
from eval_pipeline_tests.pipeline.small_suite import DAY, MODELS, evaluate, prepare

pytestmark = pytest.mark.slow

STALE = """
query Stale($key: [String!]!, $partitions: [String!]) {
  assetNodes(assetKeys: [{path: $key}]) {
    staleStatusByPartition(partitions: $partitions)
    staleCausesByPartition(partitions: $partitions) { key { path } reason }
  }
}
"""
JOBS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { jobs { name } } } } }"
PARTITIONS = [str(model_day_key(model, DAY)) for model in MODELS]


def shown(base: str, asset: str) -> list[tuple[str, list[str]]]:
    """Each model's partition of `asset` as the UI shows it: its status and the causes."""
    (node,) = graphql(base, STALE, {"key": [asset], "partitions": PARTITIONS})["assetNodes"]
    return [
        (status, [f"{'/'.join(c['key']['path'])} {c['reason']}" for c in causes])
        for status, causes in zip(
            node["staleStatusByPartition"], node["staleCausesByPartition"], strict=True
        )
    ]


def test_a_tolerance_edit_unsyncs_the_grades_and_a_model_edit_that_models_runs(
    small_suite, tmp_path: Path
):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        defs = prepare(small_suite, instance)
        # What a command-line evaluation does before it reads the suite.
        observe_settings(instance, load_config(small_suite.root), MODELS, UNNAMED)
        for model in MODELS:
            evaluate(defs, instance, model)

    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_SUITE_DIR": str(small_suite.root)}
    logs = tmp_path / "logs"
    with dagster_services(env, logs) as port:
        base = f"http://127.0.0.1:{port}"
        fresh = [("FRESH", []), ("FRESH", [])]
        jobs = {
            job["name"]
            for node in graphql(base, JOBS)["repositoriesOrError"]["nodes"]
            for job in node["jobs"]
        }
        assert {name for name in jobs if name.startswith("__")} == {"__ASSET_JOB"}, jobs
        assert {"read_suite", "build_history", "evaluate_model_day"} <= jobs
        wait = [logs / "webserver.log", logs / "daemon.log"]

        assert shown(base, "grades") == fresh and shown(base, "agent_runs") == fresh

        small_suite.config["test"]["comparison"] = {"rtol": 0.05}
        small_suite.write_config()
        by_rules = [("STALE", ["grading_rules has a new data version"])] * 2
        wait_for(
            "the grades did not turn unsynced by grading_rules",
            lambda: shown(base, "grades") == by_rules,
            timeout_s=240,
            logs=wait,
        )
        assert shown(base, "agent_runs") == fresh  # a regrade, never a re-run

        provider = small_suite.config["llm"]["providers"][0]
        provider["models"] = [{"id": MODELS[1].split(":", 1)[1], "settings": {"temperature": 0.2}}]
        small_suite.write_config()
        by_settings = [("FRESH", []), ("STALE", ["model_settings has a new data version"])]
        wait_for(
            "the second model's runs did not turn unsynced by model_settings",
            lambda: shown(base, "agent_runs") == by_settings,
            timeout_s=240,
            logs=wait,
        )

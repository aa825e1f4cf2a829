"""One (model, day) partition launched from the Dagster UI against the same partition from the command line.

Run: python benchmarks/ui_partition.py [--repeats 3] [--suite sample|tiny]

The suite (`sample`: a copy of the bundled tests_suite/, with its dbt project and the replayed
model; `tiny`: 4 tests, no dbt, a scripted OpenAI-compatible model) is evaluated once by
`eval-pipeline test`. Then, medians of `--repeats`:

* cli: `eval-pipeline test -m MODEL --no-cache` in a subprocess, every run of the partition made
  again, wall time of the command;
* ui: `dagster-webserver` and `dagster-daemon` on the suite's own instance and workspace (what
  `eval-pipeline ui` starts), the `evaluate_model_day` job launched for the same partition
  through the webserver's GraphQL API (`launchRun`, `no_cache` in its run config), timed from
  the launch until the run succeeded, and split into launch → run start (the queue, the run
  worker's process, its imports and the definitions' load), → first step, and the steps.

Printed: both medians, the ratio ui / cli (target ≤ 3), the split, and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dagster as dg  # noqa: E402
import httpx  # noqa: E402

from eval_pipeline.defs.instance import LOCATION_NAME, instance_home, write_workspace  # noqa: E402
from eval_pipeline.defs.partitions import model_day_key  # noqa: E402
from eval_pipeline.suite import load_config  # noqa: E402
from eval_pipeline_tests.agents.servers import ServerProcess, answer, by_turn  # noqa: E402
from eval_pipeline_tests.agents.tiny_suite import write_suite  # noqa: E402
from eval_pipeline_tests.cli.console import wait_for_record  # noqa: E402
from eval_pipeline_tests.conftest import copy_sample_suite  # noqa: E402
from eval_pipeline_tests.pipeline.services import (  # noqa: E402
    BIN,
    LAUNCH_RUN,
    service,
    wait_for,
)
from eval_pipeline_tests.warehouses.servers import free_port  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
DAY = "2026-03-02"


def one_answer():
    """Every run is one completion, the answer (module level: it is built in the server's process)."""
    return by_turn(answer("The revenue is 540 USD."))


def env(**extra: str) -> dict[str, str]:
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def cli_test(suite: Path, *extra: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(SCRIPT), "test", "-q", "--date", DAY, *extra],
        cwd=suite,
        env=env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: a test failed, still a full evaluation
        raise SystemExit(f"eval-pipeline test exited {done.returncode}:\n{done.stderr[-3000:]}")
    # Its Dagster record, written in the background: not timed, and never under the next
    # measurement.
    wait_for_record(suite)
    return wall


def sample_suite(work: Path) -> tuple[Path, str]:
    suite = copy_sample_suite(work / "sample")
    return suite, load_config(suite).test.models[0]


def launch(port: int, model: str) -> str:
    partition = str(model_day_key(model, DAY))
    params = {
        "selector": {
            "repositoryLocationName": LOCATION_NAME,
            "repositoryName": "__repository__",
            "jobName": "evaluate_model_day",
        },
        "runConfigData": {"ops": {"agent_runs": {"config": {"no_cache": True}}}},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    answered = httpx.post(
        f"http://127.0.0.1:{port}/graphql",
        json={"query": LAUNCH_RUN, "variables": {"params": params}},
        timeout=120,
    ).json()
    launched = answered["data"]["launchRun"]
    if launched["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"launchRun failed: {launched}")
    return launched["run"]["runId"]


def first_event(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> float:
    (record, *_) = instance.all_logs(run_id, of_type=kind)
    return record.timestamp


def ui_run(port: int, home: Path, model: str, logs: list[Path]) -> dict[str, float]:
    started = time.time()
    run_id = launch(port, model)
    with dg.DagsterInstance.from_config(str(home)) as instance:

        def finished() -> bool:
            run = instance.get_run_by_id(run_id)
            return run is not None and run.is_finished

        wait_for("the UI's run did not finish", finished, timeout_s=900, logs=logs)
        run = instance.get_run_by_id(run_id)
        done = time.time()
        if run.status is not dg.DagsterRunStatus.SUCCESS:
            failures = [
                record.dagster_event.step_failure_data.error.to_string()
                for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
            ]
            raise SystemExit(f"run {run_id} ended {run.status.value}: {failures}")
        run_start = first_event(instance, run_id, dg.DagsterEventType.RUN_START)
        step_start = first_event(instance, run_id, dg.DagsterEventType.STEP_START)
        run_end = first_event(instance, run_id, dg.DagsterEventType.RUN_SUCCESS)
    return {
        "total": done - started,
        "launch": run_start - started,
        "plan": step_start - run_start,
        "steps": run_end - step_start,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--suite", choices=("sample", "tiny"), default="sample")
    options = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start")
    work = Path(tempfile.mkdtemp(prefix="ui_partition_"))
    server = None
    try:
        if options.suite == "sample":
            suite, model = sample_suite(work)
        else:
            server = ServerProcess(one_answer)
            base_url = server.__enter__()
            suite = write_suite(
                work / "tiny",
                cases={f"t{i}": f"Question {i}: what is the revenue?" for i in range(4)},
                providers=[{"provider": "bench", "base_url": base_url, "timeout_s": 60}],
                dbt=False,
            )
            model = "bench:model-0"
        cli_test(suite, "-m", model)  # the first evaluation: warehouse, instance, partitions
        cli = statistics.median(
            cli_test(suite, "-m", model, "--no-cache") for _ in range(options.repeats)
        )
        print(f"cli: {model} on {DAY}, every run made again: {cli:.2f} s (median)")

        home = instance_home(load_config(suite))
        workspace = write_workspace(home)
        service_env = env(DAGSTER_HOME=str(home), EVAL_SUITE_DIR=str(suite))
        port = free_port()
        logs = [work / "webserver.log", work / "daemon.log"]
        webserver = [str(BIN / "dagster-webserver"), "-w", str(workspace), "-p", str(port)]
        daemon = [str(BIN / "dagster-daemon"), "run", "-w", str(workspace)]
        with (
            service(webserver, service_env, logs[0]),
            service(daemon, service_env, logs[1]),
        ):
            wait_for(
                "the webserver did not answer",
                lambda: httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=5).is_success,
                timeout_s=300,
                logs=logs,
            )
            os.environ["DAGSTER_HOME"] = str(home)
            ui_run(port, home, model, logs)  # the code server's and daemon's first load
            splits = [ui_run(port, home, model, logs) for _ in range(options.repeats)]
        median = {key: statistics.median(s[key] for s in splits) for key in splits[0]}
        print(
            f"ui: evaluate_model_day launched through GraphQL: {median['total']:.2f} s "
            f"(median; {median['launch']:.2f} s from the launch to the run's start: the queue, "
            f"the run worker's process, its imports and definitions; {median['plan']:.2f} s "
            f"to the first step; steps {median['steps']:.2f} s)"
        )
        print(f"ui / cli = {median['total'] / cli:.2f} (target ≤ 3)")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

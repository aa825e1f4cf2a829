"""A bucket store that stops answering (`kill -STOP` of its moto_server) while two models' runs
query the warehouse, through the real `eval-pipeline test`: one line names the store, exit 3,
and nothing blames the model, whose server never stopped, nor prints a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs

from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.agents.steps import answer, by_turn, execute_sql, tool_calls
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import SCRIPT, cli_env
from eval_pipeline_tests.cli.replay_suite import set_store
from eval_pipeline_tests.store.buckets import AWS_ENV, Bucket, moto_missing, moto_process

pytestmark = pytest.mark.slow

MODELS = ("openai:m1", "openai:m2")
TESTS = 40
#: The store goes silent once this many model requests came: runs are in flight, each with
#: its query on the warehouse, and some are journaled already.
FROZEN_AFTER = 30


@pytest.fixture
def frozen_mid_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    """How `eval-pipeline test` of two models ended when its bucket was stopped mid-run."""
    if reason := moto_missing():
        pytest.skip(reason)
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)
    script = by_turn(
        tool_calls(execute_sql("SELECT count(*) AS n FROM orders")),
        answer("12 orders.", delay_s=0.3),
    )
    with moto_process() as (endpoint, pid), ScriptedServer("openai", script=script) as llm:
        try:
            bucket = Bucket(endpoint, f"eval-{uuid.uuid4().hex[:12]}")
            s3fs.S3FileSystem(endpoint_url=endpoint).mkdir(bucket.name)
            cases = {f"t{i:04d}": f"Question {i}?" for i in range(TESTS)}
            providers = [{"provider": "openai", "base_url": llm.base_url, "api_key": "k"}]
            root = write_suite(tmp_path / "suite", cases=cases, providers=providers, dbt=False)
            set_store(root, bucket.store_config)
            models = [arg for model in MODELS for arg in ("-m", model)]
            child = subprocess.Popen(
                [str(SCRIPT), "test", "--date", "2026-04-01", *models],
                cwd=root,
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            stopped: dict[str, float] = {}

            def freeze() -> None:
                while child.poll() is None:
                    if len(llm.requests) >= FROZEN_AFTER:
                        os.kill(pid, signal.SIGSTOP)
                        stopped["at"] = time.monotonic()
                        return
                    time.sleep(0.05)

            watcher = threading.Thread(target=freeze, daemon=True)
            watcher.start()
            try:
                stdout, stderr = child.communicate(timeout=900)
            finally:
                child.kill()
            watcher.join()
            yield {
                "returncode": child.returncode,
                "stdout": stdout,
                "stderr": stderr,
                "endpoint": endpoint,
                "bucket": bucket.name,
                "stopped": "at" in stopped,
                "after_stop_s": time.monotonic() - stopped.get("at", time.monotonic()),
            }
        finally:
            os.kill(pid, signal.SIGCONT)


def test_a_bucket_frozen_mid_run_ends_with_one_line_naming_the_store(frozen_mid_run):
    ended = frozen_mid_run
    assert ended["stopped"], ("the store was never stopped", ended["stderr"])
    said = ended["stdout"] + ended["stderr"]
    assert ended["returncode"] == 3, said
    assert "Traceback" not in said and "crashed" not in said, said
    assert "sandbox is closed" not in said and "Unclosed client session" not in said, said
    errors = [line for line in ended["stderr"].splitlines() if line.startswith("error:")]
    assert len(errors) == 1, ended["stderr"]
    assert "the bucket store " in errors[0] and f"at {ended['endpoint']} stopped" in errors[0]
    # The model's server answered all along: no line blames it, nor retries it.
    blamed = [line for line in ended["stderr"].splitlines() if line.startswith(MODELS)]
    assert blamed == [], blamed
    assert "no response within" not in said
    # How long the frozen store cost (docs/limits.md), for a person reading the test log.
    print(f"the command ended {ended['after_stop_s']:.0f} s after the store stopped")

"""A judge's non-answer through the real `eval-pipeline test`: kept like a verdict, so an
unchanged rerun asks the judge nothing and takes the "nothing changed" shortcut, and
`--rejudge` asks again; a run another check already failed is not judged unless
`test.judge_failed_runs` asks for it.

The model under test and the judge are served by one scripted OpenAI-compatible server on
127.0.0.1, told apart by the `model` of each request; the judge never answers with a verdict.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    error,
)
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "openai:gpt-4.1", "--format", "json")
CRITERIA = "Says it cannot delete data"
#: No JSON object: the judge's answer holds no verdict, and neither does the retry's.
NON_ANSWER = "I would rather not say whether the reply is fine."
CASES = {
    # judged only: the judge's non-answer makes the run an `error`
    "stays_read_only": {
        "prompt": "Delete the QA test accounts.",
        "evaluators": [{"name": "read_only", "criteria": CRITERIA}],
    },
    # the agent calls no tool, so the assertion fails it whatever the judge would say
    "looks_first": {
        "prompt": "Which tables are there?",
        "assertions": [{"type": "tool_call", "tool": "list_tables"}],
        "evaluators": [{"name": "read_only", "criteria": CRITERIA}],
    },
}


class Server:
    """The model under test answers in text; the judge answers `NON_ANSWER`."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        server.set_script(self)

    def __call__(self, request: RecordedRequest, _index: int) -> Step:
        if request.json["model"] == "gpt-judge":
            return answer(NON_ANSWER)
        return answer("I cannot delete anything: my access is read-only.")

    def judge_calls(self) -> int:
        return sum(r.json["model"] == "gpt-judge" for r in self.server.requests)


@pytest.fixture
def server() -> Iterator[Server]:
    with ScriptedServer("openai") as scripted:
        yield Server(scripted)


def make_suite(root: Path, server: Server) -> Path:
    provider = {"provider": "openai", "base_url": server.server.base_url, "timeout_s": 5}
    return write_suite(
        root, cases=CASES, providers=[provider], judge_model="openai:gpt-judge", dbt=False
    )


def evaluate(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = run_cli(*ARGS, *args, cwd=root)
    no_traceback(result)
    grades = {r["name"]: r for r in json.loads(result.stdout)["results"]}
    return result, grades


def test_a_judge_non_answer_is_kept_and_an_unchanged_rerun_asks_nothing(tmp_path, server):
    root = make_suite(tmp_path / "suite", server)

    first, grades = evaluate(root)
    assert first.returncode == 3, first.stdout + first.stderr  # an error run
    judged = grades["stays_read_only"]
    assert judged["status"] == "error" and "gave no verdict twice" in judged["message"]
    # The answer and one retry with a reminder, for the one run no other check failed.
    assert server.judge_calls() == 2
    assert grades["looks_first"]["status"] == "failed"
    skipped = next(
        c for c in grades["looks_first"]["details"]["checks"] if c["kind"] == "evaluators"
    )
    assert skipped["status"] == "skipped"
    assert "judge_failed_runs" in skipped["message"]

    again, grades = evaluate(root)
    assert server.judge_calls() == 2  # the non-answer is kept like a verdict
    assert "nothing changed since the last evaluation of 2026-03-02" in again.stdout + again.stderr
    assert again.returncode == 3
    assert "gave no verdict twice" in grades["stays_read_only"]["message"]

    rejudged, grades = evaluate(root, "--rejudge")
    assert server.judge_calls() == 4  # asked again, and again without a verdict
    assert rejudged.returncode == 3
    assert grades["looks_first"]["status"] == "failed"


def test_judge_failed_runs_asks_the_judge_about_a_run_already_failed(tmp_path, server):
    root = make_suite(tmp_path / "suite", server)
    evaluate(root)
    assert server.judge_calls() == 2

    path = root / "eval_config.yaml"
    config = yaml.safe_load(path.read_text())
    config["test"]["judge_failed_runs"] = True
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result, grades = evaluate(root)

    # Only the failed run is judged anew: the other's kept non-answer is its verdict still.
    assert server.judge_calls() == 4, result.stdout + result.stderr
    failed = grades["looks_first"]
    assert failed["status"] == "failed"  # a known failure outranks the judge's error
    (evaluators,) = [c for c in failed["details"]["checks"] if c["kind"] == "evaluators"]
    assert evaluators["status"] == "error" and "gave no verdict twice" in evaluators["message"]


def test_a_judge_that_did_not_answer_is_asked_again_on_an_unchanged_rerun(tmp_path):
    """A refused request (HTTP 400) is no answer: nothing is kept, the next command grades
    again and the judge, answering now, decides the run."""
    says = [error(400, "the judge is overloaded")]

    def script(request: RecordedRequest, _index: int) -> Step:
        if request.json["model"] == "gpt-judge":
            return says[0]
        return answer("I cannot delete anything: my access is read-only.")

    with ScriptedServer("openai", script=script) as scripted:
        root = make_suite(tmp_path / "suite", Server(scripted))
        scripted.set_script(script)
        first, grades = evaluate(root)
        assert first.returncode == 3
        assert "unavailable" in grades["stays_read_only"]["message"]

        says[0] = answer(json.dumps({"passed": True, "reasoning": "It refuses to delete."}))
        again, grades = evaluate(root)
    assert "nothing changed since" not in again.stdout + again.stderr
    assert grades["stays_read_only"]["status"] == "passed", again.stdout + again.stderr

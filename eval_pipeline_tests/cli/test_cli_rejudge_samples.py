"""`eval-pipeline test --rejudge-samples j`: each run a judge decided is
judged j times in all, and the report tells judge noise from agent noise, per test.

The model under test and the judge are one scripted OpenAI-compatible server (told apart by
each request's `model`). The judge always passes one test and, on the other, gives a
different verdict on its second judging of the same transcript than on its first and third.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.servers import RecordedRequest, ScriptedServer, Step, answer
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
STABLE, SHAKY = "declines_to_delete_data", "explains_revenue"
PROMPTS = {
    STABLE: "Delete the QA test accounts from the customer list.",
    SHAKY: "Explain how revenue is counted.",
}


class Judge:
    """Answers the agent with a fixed reply; as the judge, per test, by how often asked."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.asked: Counter[str] = Counter()
        self._lock = threading.Lock()
        server.set_script(self)

    def __call__(self, request: RecordedRequest, _index: int) -> Step:
        text = json.dumps(request.messages)
        if not request.json["model"].startswith("gpt-judge"):
            return answer("Revenue counts shipped orders only; I cannot delete data.")
        test = SHAKY if PROMPTS[SHAKY] in text else STABLE
        with self._lock:
            self.asked[test] += 1
            nth = self.asked[test]
        passed = test == STABLE or nth % 2 == 1  # the shaky test: pass, fail, pass, ...
        return answer(json.dumps({"passed": passed, "reasoning": f"judging {nth}"}))


@pytest.fixture
def judge() -> Iterator[Judge]:
    with ScriptedServer("openai") as scripted:
        yield Judge(scripted)


def make_suite(root: Path, judge: Judge) -> Path:
    provider = {"provider": "openai", "base_url": judge.server.base_url, "timeout_s": 5}
    cases = {
        name: {"prompt": prompt, "evaluators": [{"name": "criterion", "criteria": "Is right"}]}
        for name, prompt in PROMPTS.items()
    }
    return write_suite(
        root, cases=cases, providers=[provider], judge_model="openai:gpt-judge", dbt=False
    )


def test_rejudge_samples_reports_the_judges_self_agreement_per_test(tmp_path, judge):
    root = make_suite(tmp_path / "suite", judge)

    result = run_cli("test", "--date", DAY, "--rejudge-samples", "3", "--format", "json", cwd=root)

    no_traceback(result)
    document = json.loads(result.stdout)
    assert judge.asked == {STABLE: 3, SHAKY: 3}  # each transcript judged 3 times in all
    by_name = {r["name"]: r for r in document["results"]}
    assert by_name[STABLE]["judge_samples"] == [True, True, True]
    assert by_name[STABLE]["judge_self_agreement"] == 1.0
    assert sorted(by_name[SHAKY]["judge_samples"]) == [False, True, True]
    assert by_name[SHAKY]["judge_self_agreement"] == pytest.approx(2 / 3)
    noise = {n["name"]: n for n in document["judge_noise"]}
    assert noise[SHAKY]["flips_on_judge"] is True and noise[STABLE]["flips_on_judge"] is False
    assert noise[SHAKY]["samples"] == 3 and noise[SHAKY]["judged_runs"] == 1
    assert noise[STABLE]["agent_pass_at_1"] == 1.0
    # The results file carries the same.
    (written,) = (root / "outputs").glob("results_*.json")
    assert json.loads(written.read_text())["judge_noise"] == document["judge_noise"]

    # The pretty report flags the test; the samples come from the cache, not the judge again.
    pretty = run_cli("test", "--date", DAY, "--rejudge-samples", "3", "-q", cwd=root)
    no_traceback(pretty)
    assert "Where the noise comes from" in pretty.stdout
    (line,) = [line for line in pretty.stdout.splitlines() if "flips on the judge alone" in line]
    assert SHAKY in line and "67%" in line
    assert judge.asked == {STABLE: 3, SHAKY: 3}

    # Without the option, nothing is re-judged and no such section is shown.
    once = run_cli("test", "--date", DAY, "-q", cwd=root)
    assert "Where the noise comes from" not in once.stdout
    assert judge.asked == {STABLE: 3, SHAKY: 3}


def test_a_bad_rejudge_samples_value_is_one_line_and_exit_2(tmp_path, judge):
    root = make_suite(tmp_path / "suite", judge)
    result = run_cli("test", "--date", DAY, "--rejudge-samples", "0", cwd=root)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--rejudge-samples" in result.stderr and "from 1 to 20" in result.stderr
    no_traceback(result)
    assert judge.asked == {}

"""Every input of a grade or a run counts, on the whole suite: a changed rule regrades, a changed model re-runs.

Through the real `eval-pipeline test`, without a selection (the path that once kept stale
verdicts): after one evaluation, each step changes one grading rule of `eval_config.yaml`
(the suite's tolerance, the answer extraction) and checks that the next command regrades the
stored runs with no agent call, reports the new verdict and names the rule. Then the model's
endpoint and request settings change, and the next command asks the model again.

One evaluated suite is shared by the module, and each change is made on top of the ones
before it (each test reads the verdicts it starts from): the tolerances add up, one rule at a
time, each letting one more test pass, so every step is a change of that rule alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    by_turn,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import prompt_of, write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "local:agent")
NEAR = "What is the value?"  # the agent answers 100.0 where the reference says 100.05
LARGE = "What is the large value?"  # 1000.0 where the reference says 1000.4
SMALL = "What is the small value?"  # 0.1 where the reference says 0.4
TWO = "How many are there?"  # the right figure is the first of two queries, not the last
CASES = {
    "near_value": {"prompt": NEAR, "sql": "SELECT 100.05 AS v"},
    "near_large": {"prompt": LARGE, "sql": "SELECT 1000.4 AS v"},
    "near_small": {"prompt": SMALL, "sql": "SELECT 0.4 AS v"},
    "first_of_two": {"prompt": TWO, "sql": "SELECT 7 AS n"},
}
# The suite's tolerance, one rule added at a time, and the one test each addition lets pass:
# atol 0.1 admits 100.0 for 100.05 (not 1000.0 for 1000.4, nor 0.1 for 0.4); rtol 0.001 then
# admits 1000.0 (within 1.0 of 1000.4; not 0.1 of 0.4); decimals 0 rounds 0.1 and 0.4 to 0.
TOLERANCES = (
    ("atol", 0.1, "near_value"),
    ("rtol", 0.001, "near_large"),
    ("decimals", 0, "near_small"),
)
# Each conversation by its question, each step by its turn (stateless: any number of runs).
AGENT = {
    NEAR: by_turn(tool_calls(execute_sql("SELECT 100.0 AS v")), answer("It is 100.")),
    LARGE: by_turn(tool_calls(execute_sql("SELECT 1000.0 AS v")), answer("It is 1000.")),
    SMALL: by_turn(tool_calls(execute_sql("SELECT 0.1 AS v")), answer("It is 0.1.")),
    TWO: by_turn(
        tool_calls(execute_sql("SELECT 7 AS n")),
        tool_calls(execute_sql("SELECT 1 AS n")),
        answer("There are 7."),
    ),
}
# nao's extraction: the judge writes the query over the agent's results that gives the answer
# (the first query's: for the tests of one query, the same answer as `last_query`).
EXTRACTION = answer("```sql\nSELECT * FROM q1\n```")


class Provider:
    """One scripted OpenAI-compatible server: the agent under test and the judge, told apart
    by the model each request names."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        server.set_script(self)

    def __call__(self, request: RecordedRequest, index: int) -> Step:
        if request.json["model"] == "gpt-judge":
            return EXTRACTION
        return AGENT[prompt_of(request)](request, index)

    def agent_calls(self) -> int:
        return sum(r.json["model"] != "gpt-judge" for r in self.server.requests)


@pytest.fixture(scope="module")
def provider():
    with ScriptedServer("openai") as server:
        yield Provider(server)


@pytest.fixture(scope="module")
def evaluated(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite after one evaluation: every test fails under the default rules. Shared by
    the module: each test changes it further."""
    root = write_suite(
        tmp_path_factory.mktemp("grading_inputs") / "suite",
        cases=CASES,
        dbt=False,
        providers=[
            {"provider": "local", "base_url": provider.server.base_url, "timeout_s": 30},
            {"provider": "judge", "base_url": provider.server.base_url, "timeout_s": 30},
        ],
        judge_model="judge:gpt-judge",
    )
    edit_test_block(root, lambda test: test.update(extraction="last_query"))
    first = run_cli(*ARGS, cwd=root)
    no_traceback(first)
    assert first.returncode == 1, first.stdout + first.stderr
    assert verdicts(first.stdout) == dict.fromkeys(CASES, False)
    return root


def edit_test_block(root: Path, change: Callable[[dict], None]) -> None:
    path = root / "eval_config.yaml"
    config = yaml.safe_load(path.read_text())
    change(config["test"])
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def results(output: str) -> list[dict]:
    return json.loads(written_results(output).read_text())["results"]


def verdicts(output: str) -> dict[str, bool]:
    return {r["name"]: r["passed"] for r in results(output)}


def test_a_suite_tolerance_regrades_the_whole_suite_without_an_agent_call(evaluated, provider):
    """atol, then rtol, then decimals: each added alone regrades the stored runs, names the
    tolerance and lets its own test pass."""
    root = evaluated
    start = verdicts(run_cli(*ARGS, cwd=root).stdout)
    assert not any(start[name] for _, _, name in TOLERANCES), start
    comparison: dict[str, float] = {}
    passing: set[str] = set()
    for rule, value, name in TOLERANCES:
        calls = provider.agent_calls()
        comparison[rule] = value
        edit_test_block(root, lambda test: test.update(comparison=dict(comparison)))
        changed = run_cli(*ARGS, cwd=root)
        no_traceback(changed)
        passing.add(name)

        assert provider.agent_calls() == calls, f"a change of {rule} called the agent"
        assert verdicts(changed.stdout) == {**start, **dict.fromkeys(passing, True)}, rule
        details = {r["name"]: r["details"] for r in results(changed.stdout)}
        assert details[name]["tolerances"][rule] == value, rule
        assert f"improved since the previous run of local:agent: {name} (tolerance changed)" in (
            changed.stdout
        ), rule
        assert "verdicts changed by: tolerance" in changed.stdout, rule
        assert "its inputs are unchanged" not in changed.stderr, rule


def test_the_extraction_regrades_the_whole_suite_and_is_named(evaluated, provider):
    root = evaluated
    start = verdicts(run_cli(*ARGS, cwd=root).stdout)
    assert start["first_of_two"] is False
    calls = provider.agent_calls()

    edit_test_block(root, lambda test: test.update(extraction="llm"))
    changed = run_cli(*ARGS, cwd=root)
    no_traceback(changed)

    assert provider.agent_calls() == calls, "an extraction change called the agent"
    assert verdicts(changed.stdout) == {**start, "first_of_two": True}
    assert "first_of_two (extraction changed)" in changed.stdout
    assert "verdicts changed by: extraction" in changed.stdout


def test_another_endpoint_or_request_setting_of_the_model_runs_the_tests_again(evaluated):
    root = evaluated
    runs = len(CASES)
    with ScriptedServer("openai") as elsewhere:
        Provider(elsewhere)
        path = root / "eval_config.yaml"
        config = yaml.safe_load(path.read_text())
        config["llm"]["providers"][0]["base_url"] = elsewhere.base_url
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        moved = run_cli(*ARGS, cwd=root)
        no_traceback(moved)
        assert len(elsewhere.requests) > 0, "the new endpoint got no request"
        assert f"{runs} agent run(s) executed, 0 reused." in moved.stdout
        assert f"re-run: model settings changed — {runs} run(s)" in moved.stdout

        asked = len(elsewhere.requests)
        config["llm"]["providers"][0]["models"] = [{"id": "agent", "max_tokens": 100}]
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        capped = run_cli(*ARGS, cwd=root)
        no_traceback(capped)
        assert len(elsewhere.requests) > asked, "a new max_tokens asked the model nothing"
        assert elsewhere.last.json["max_tokens"] == 100
        assert f"re-run: model settings changed — {runs} run(s)" in capped.stdout

        again = run_cli(*ARGS, cwd=root)  # nothing changed since: every run is reused
        assert f"all {runs} runs reused" in again.stdout

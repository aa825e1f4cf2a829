"""Why `eval-pipeline test` ran or graded stored runs again, said in the terminal: one line per
cause ("re-run: context changed (RULES.md) — 2 run(s)", "regraded: grading rules changed
(tolerance) — 2 run(s), no verdict moved"), and none when nothing was edited.

One evaluated suite is shared by the module, each test editing it further in order: the
context, a test file, then the suite's tolerance twice (once moving no verdict, once one).
"""

from __future__ import annotations

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
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
ARGS = ("test", "--date", DAY, "-m", "local:agent")
NEAR = "What is the value?"  # the agent answers 100.0 where the reference says 100.05
COUNT = "How many are there?"  # the agent answers 7, as the reference does
CASES = {
    "near_value": {"prompt": NEAR, "sql": "SELECT 100.05 AS v"},
    "count": {"prompt": COUNT, "sql": "SELECT 7 AS n"},
}
VALUE = by_turn(tool_calls(execute_sql("SELECT 100.0 AS v")), answer("It is 100."))
SEVEN = by_turn(tool_calls(execute_sql("SELECT 7 AS n")), answer("There are 7."))


def agent(request: RecordedRequest, index: int) -> Step:
    return (VALUE if prompt_of(request).startswith(NEAR) else SEVEN)(request, index)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with ScriptedServer("openai", script=agent) as server:
        root = write_suite(
            tmp_path_factory.mktemp("rerun_causes") / "suite",
            cases=CASES,
            dbt=False,
            providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
        )
        first = run_cli(*ARGS, cwd=root)
        no_traceback(first)
        assert first.returncode == 1, first.stdout + first.stderr
        # The first evaluation ran every test for the first time: nothing ran *again*.
        assert causes(first.stdout) == [], first.stdout
        yield root


def causes(output: str) -> list[str]:
    """The report's lines saying why something ran or was graded again."""
    return [
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith(("re-run:", "regraded:"))
    ]


def evaluate(root: Path) -> str:
    result = run_cli(*ARGS, cwd=root)
    no_traceback(result)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.stdout


def edit_case(root: Path, name: str, change: Callable[[dict], None]) -> None:
    path = root / "cases" / f"{name}.yml"
    case = yaml.safe_load(path.read_text())
    change(case)
    path.write_text(yaml.safe_dump(case, sort_keys=False))


def edit_tolerance(root: Path, **tolerance: float) -> None:
    path = root / "eval_config.yaml"
    config = yaml.safe_load(path.read_text())
    config["test"]["comparison"] = tolerance
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def test_nothing_edited_says_no_cause(evaluated):
    assert causes(evaluate(evaluated)) == []


def test_a_context_edit_names_the_file_and_the_runs(evaluated):
    with (evaluated / "RULES.md").open("a", encoding="utf-8") as rules:
        rules.write("Refunds are subtracted from revenue.\n")
    assert causes(evaluate(evaluated)) == ["re-run: context changed (RULES.md) — 2 run(s)"]
    assert causes(evaluate(evaluated)) == []


def test_a_test_file_edit_names_the_file(evaluated):
    edit_case(evaluated, "count", lambda case: case.update(prompt=COUNT + " In all?"))
    assert causes(evaluate(evaluated)) == ["re-run: test changed (count.yml) — 1 run(s)"]

    # The same answer, written otherwise: the stored run is graded again, not run again.
    edit_case(evaluated, "near_value", lambda case: case.update(sql="SELECT 100.050 AS v"))
    assert causes(evaluate(evaluated)) == [
        "regraded: test changed (near_value.yml) — 1 run(s), no verdict moved"
    ]


def test_a_tolerance_edit_says_whether_a_verdict_moved(evaluated):
    edit_tolerance(evaluated, rtol=1e-6)  # 100.0 is still not 100.05
    assert causes(evaluate(evaluated)) == [
        "regraded: grading rules changed (tolerance) — 2 run(s), no verdict moved"
    ]
    edit_tolerance(evaluated, rtol=1e-6, atol=0.1)  # now it is
    assert causes(evaluate(evaluated)) == [
        "regraded: grading rules changed (tolerance) — 2 run(s), 1 verdict moved"
    ]

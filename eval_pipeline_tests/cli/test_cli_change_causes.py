"""What `eval-pipeline test` names as the cause of a changed verdict when the previous run of a test was an error and nothing was edited."""

from __future__ import annotations

import pytest

from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
    answer,
    error,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.agents.tiny_suite import by_prompt, write_suite
from eval_pipeline_tests.cli.console import no_traceback, run_cli

pytestmark = pytest.mark.slow

DAY = "2026-03-02"
PROMPT = "How many orders are there?"
ARGS = ("test", "--date", DAY, "-m", "local:agent")


def test_a_pass_after_an_error_names_the_error_not_an_edit(tmp_path):
    """The agent's server refuses the first run (an `error` run), then answers right: the
    second command reports the test improved because the previous run was an error, not
    because the reference SQL or the tolerance changed (neither was touched); a third, run
    afresh and refused again, regressed because this run is an error."""
    steps = [
        error(400, "the model is overloaded"),
        tool_calls(execute_sql("SELECT count(*) AS n FROM orders")),
        answer("There are 12 orders."),
        error(400, "the model is overloaded again"),
    ]
    with ScriptedServer("openai", script=by_prompt({PROMPT: steps})) as server:
        root = write_suite(
            tmp_path / "suite",
            cases={"orders": {"prompt": PROMPT, "sql": "SELECT count(*) AS n FROM orders"}},
            providers=[{"provider": "local", "base_url": server.base_url, "timeout_s": 30}],
            dbt=False,
        )
        first = run_cli(*ARGS, cwd=root)
        no_traceback(first)
        assert first.returncode == 3 and "error" in first.stdout, first.stdout + first.stderr
        second = run_cli(*ARGS, cwd=root)
        no_traceback(second)
        third = run_cli(*ARGS, "--no-cache", cwd=root)
        no_traceback(third)
    assert second.returncode == 0, second.stdout + second.stderr
    line = next(
        (x for x in second.stdout.splitlines() if x.startswith("improved since the previous")),
        "",
    )
    assert (
        line
        == "improved since the previous run of local:agent: orders (the previous run was an error)"
    ), second.stdout
    assert (
        "regressed since the previous run of local:agent: orders (this run is an error)"
        in third.stdout
    ), third.stdout

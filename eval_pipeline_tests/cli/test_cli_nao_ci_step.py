"""A nao project moved over: `nao test` (nao-core 0.3.29's own CLI) left its results file in `tests/outputs/`, then the project's CI step `eval-pipeline test && eval-pipeline diff --last` runs nao's agent under us, its answers unchanged, on a stand-in nao backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipeline_tests.agents.nao_backend import fake_nao_backend, nao_reply
from eval_pipeline_tests.agents.real_nao_backend import NaoUnavailable, nao_python
from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.test_cli_nao_backend import (
    KEY_VARIABLE,
    NAO_ARGS,
    NAO_MODEL,
    _nao_test,
    write_project,
)

#: An ORDER BY the agent answers in the other order: nao compares rows in any order (pass),
#: we compare them in the order the reference SQL sets (fail).
TOP_SQL = "SELECT customer, SUM(amount) AS spent FROM orders GROUP BY customer ORDER BY spent DESC"
TOP_ROWS = [{"customer": "bo", "spent": 122.25}, {"customer": "al", "spent": 10.5}]
#: test → (the agent's SQL, its rows, the rows nao's verification read, the reference rows).
#: customer_count: the agent is right and nao's verification is not (nao fails, we pass).
ANSWERS = {
    "total_revenue": (
        "SELECT SUM(amount) AS total_revenue FROM orders",
        [{"total_revenue": 132.75}],
        [{"total_revenue": 132.75}],
        [{"total_revenue": 132.75}],
    ),
    "order_count": (
        "SELECT COUNT(*) AS orders FROM orders",
        [{"orders": 3}],
        [{"orders": 3}],
        [{"orders": 3}],
    ),
    "customer_count": (
        "SELECT COUNT(DISTINCT customer) AS customers FROM orders",
        [{"customers": 2}],
        [{"customers": 3}],
        [{"customers": 2}],
    ),
    "top_customers": (TOP_SQL.replace(" DESC", ""), TOP_ROWS[::-1], TOP_ROWS[::-1], TOP_ROWS),
}


def _same_answers(body: dict[str, Any], _index: int):
    name = next(n for n in ANSWERS if n.replace("_", " ") in body["prompt"])
    sql, rows, verified, expected = ANSWERS[name]
    return nao_reply(
        "Done.", sql=sql, rows=rows, verification_rows=verified, expected_rows=expected
    )


def _project(root: Path, backend_url: str) -> Path:
    """The nao project of `write_project` with a test named by its prompt and an ORDER BY;
    our gate lets one failure of four through (`min_accuracy`), as a CI gate might."""
    project = write_project(root, llm_url="http://127.0.0.1:9/v1", backend_url=backend_url)
    for name in ANSWERS:
        sql = TOP_SQL if name == "top_customers" else ANSWERS[name][0]
        (project / "tests" / f"{name}.yml").write_text(
            f"name: {name}\nprompt: What is the {name.replace('_', ' ')}?\nsql: {sql}\n",
            encoding="utf-8",
        )
    (project / "eval_config.yaml").write_text(
        f"nao_backend:\n  url: {backend_url}\n"
        "test:\n  extraction: last_query\n  threads: 2\n  min_accuracy: 0.7\n"
        f"  models:\n    - nao:{NAO_MODEL}\n",
        encoding="utf-8",
    )
    with duckdb.connect(str(project / "data" / "shop.duckdb")) as connection:
        assert connection.execute(TOP_SQL).fetchall() == [tuple(r.values()) for r in TOP_ROWS]
    return project


def _ci_step(project: Path, *test_args: str):
    """`eval-pipeline test && eval-pipeline diff --last`: the diff's result when the test
    step passed, else the test step's."""
    tested = run_cli("test", *test_args, cwd=project, env={KEY_VARIABLE: "sk-unused"})
    no_traceback(tested)
    if tested.returncode != 0:
        return tested
    compared = run_cli("diff", "--last", cwd=project)
    no_traceback(compared)
    return compared


@pytest.mark.slow
def test_the_ci_step_passes_after_moving_over_when_the_answers_did_not_change(tmp_path):
    """nao's file and ours pair nao's agent by model (nao's `openaiCompatible/vllm:qwen3`,
    our `nao:openaiCompatible/vllm:qwen3`); the two verdicts that differ only by the grading
    rules are labelled so, not a regression, and the step exits 0."""
    try:
        python = nao_python()
    except NaoUnavailable as error:
        pytest.skip(f"nao-core 0.3.29 cannot be installed here: {error}")
    with fake_nao_backend(_same_answers) as backend:
        project = _project(tmp_path / "shop", backend.url)
        _nao_test(python, project, backend.url, tmp_path / "home")
        assert len(backend.runs) == len(ANSWERS)
        step = _ci_step(project, "-u", NAO_ARGS[3], "--password", NAO_ARGS[5])
    assert step.returncode == 0, step.stdout + step.stderr
    rows = {tuple(line.split()[:2]): line for line in step.stdout.splitlines()[1:-1]}
    model = f"nao:{NAO_MODEL}"
    assert set(rows) == {(name, model) for name in ANSWERS}, step.stdout
    assert rows[("top_customers", model)].endswith("PASS → FAIL  changed by grading rules (nao)")
    assert rows[("customer_count", model)].endswith("FAIL → PASS  changed by grading rules (nao)")
    assert step.stdout.splitlines()[-1] == (
        "Summary: 0 regressions, 0 fixes, 2 unchanged, 0 added, 0 removed, "
        "2 changed by grading rules"
    )

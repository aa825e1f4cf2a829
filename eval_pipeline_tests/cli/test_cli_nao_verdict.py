"""nao's own verdict of a backend's verification is a second opinion: whatever its comparison meets, the run and our grade stand, through `eval-pipeline test` on a stand-in nao backend."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipeline_tests.agents.nao_backend import fake_nao_backend, nao_reply
from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.cli.test_cli_nao_backend import (
    NAO_ARGS,
    as_json,
    stored_details,
    write_project,
)

#: Customer codes that are mostly number-like text: nao's comparison reads '100' as 100.0
#: and keeps 'A7' as text, in one column.
CODES = ["100", "200", "A7", "400", "500"]
CODES_SQL = "SELECT customer_code FROM customers"


def _project(root: Path, backend_url: str) -> Path:
    project = write_project(root, llm_url="http://127.0.0.1:9/v1", backend_url=backend_url)
    with duckdb.connect(str(project / "data" / "shop.duckdb")) as connection:
        connection.execute("CREATE TABLE customers (customer_code TEXT)")
        connection.executemany("INSERT INTO customers VALUES (?)", [[c] for c in CODES])
    (project / "tests" / "customer_codes.yml").write_text(
        f"name: customer_codes\nprompt: List every customer code.\nsql: {CODES_SQL}\n",
        encoding="utf-8",
    )
    return project


@pytest.mark.slow
def test_a_column_of_number_like_and_plain_text_is_compared_and_the_run_kept(tmp_path):
    """nao's backend answers right with a column mixing '100' and 'A7': both verdicts pass,
    the run is stored once, and the rerun reuses it instead of asking the backend again."""
    rows = [{"customer_code": c} for c in CODES]
    shuffled = [rows[i] for i in (3, 0, 4, 2, 1)]

    def script(_body, _index):
        return nao_reply(
            "The codes are 100, 200, A7, 400 and 500.",
            sql=CODES_SQL,
            rows=shuffled,
            verification_rows=shuffled,
            expected_rows=rows,
        )

    with fake_nao_backend(script) as backend:
        project = _project(tmp_path / "shop", backend.url)
        first = as_json(project, DAY, "-s", "customer_codes", *NAO_ARGS)
        no_traceback(first)
        assert first.returncode == 0, first.stdout + first.stderr
        (result,) = json.loads(first.stdout)["results"]
        assert (result["status"], result["error"]) == ("passed", None)
        assert result["details"]["nao_verdict"]["passed"] is True
        again = as_json(project, DAY, "-s", "customer_codes", *NAO_ARGS)
        no_traceback(again)
        assert again.returncode == 0, again.stdout + again.stderr
        assert len(backend.runs) == 1  # the rerun sent nothing
    verdict = stored_details(project, DAY)["customer_codes"]["nao"]["verdict"]
    assert verdict["passed"] is True


@pytest.mark.slow
def test_a_nao_verdict_that_cannot_be_computed_leaves_the_run_and_says_why(tmp_path, monkeypatch):
    """Whatever stops nao's comparison, the run is kept with our grade, its verdict is a note
    in the results file, the stored run and the report, and a rerun asks nothing again."""
    from eval_pipeline.agents import _nao_reply  # the unit itself: a fault put inside it

    def broken(*_args, **_kwargs):
        raise ValueError("a comparison that cannot be made\n" + "x" * 5000)

    monkeypatch.setattr(_nao_reply, "nao_data_verdict", broken)
    with fake_nao_backend() as backend:
        project = write_project(
            tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=backend.url
        )
        args = ("test", "--date", DAY, "-s", "total_revenue", *NAO_ARGS)
        first = run_cli(*args, "--format", "json", cwd=project)
        no_traceback(first)
        assert first.returncode == 0, first.stdout + first.stderr
        (result,) = json.loads(first.stdout)["results"]
        assert (result["status"], result["error"]) == ("passed", None)
        verdict = result["details"]["nao_verdict"]
        assert verdict["passed"] is None
        assert verdict["message"].startswith("nao's comparison could not be computed (ValueError")
        assert "\n" not in verdict["message"] and len(verdict["message"]) < 400
        again = run_cli(*args, "-v", cwd=project)
        no_traceback(again)
        assert len(backend.runs) == 1
    assert "nao's verdict: none (nao's comparison could not be computed" in again.stdout
    assert "ours passed, nao's" not in again.stdout
    stored = stored_details(project, DAY)["total_revenue"]["nao"]
    assert stored["verdict"] is None and stored["verdict_note"] == verdict["message"]


@pytest.mark.slow
def test_naos_verification_sql_names_a_query_the_results_file_holds(tmp_path):
    """nao verifies an answer with SQL over the agent's query by nao's id (`query_1`); the
    results file names that query by the same id in its tool calls, as `nao test` writes it,
    so the table the verification reads is found in the file."""
    with fake_nao_backend() as backend:
        project = write_project(
            tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=backend.url
        )
        run = as_json(project, DAY, "-s", "total_revenue", *NAO_ARGS)
    no_traceback(run)
    assert run.returncode == 0, run.stdout + run.stderr
    (result,) = json.loads(run.stdout)["results"]
    verification = result["details"]["nao_verdict"]["sql"]
    ids = [call["result"]["id"] for call in result["details"]["tool_calls"]]
    assert verification == "SELECT total_revenue FROM query_1"
    assert ids == ["query_1"]

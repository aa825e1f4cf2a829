"""A run of nao's agent on the viewer's run page: nao's own verification (its SQL, verdict
and message) beside our verdict."""

from __future__ import annotations

import pytest

from eval_pipeline.store import write_rows
from eval_pipeline.viewer import run_id
from eval_pipeline_tests.viewer.conftest import fetch, start
from eval_pipeline_tests.viewer.history import CASES, DAY3, GPT, _run_and_grade, build_store

NAO = "nao:openai:gpt-4.1"
NAO_SQL = "SELECT SUM(net_revenue_usd) AS net_revenue_usd FROM tool_call_1"


@pytest.fixture
def server(tmp_path):
    layout = build_store(tmp_path / ".eval")
    run, grade, _ = _run_and_grade(CASES[0], NAO, DAY3, 0)
    run["answerer_details"] = {
        "nao": {
            "verification": {"sql": NAO_SQL, "data": [], "error": None},
            "verdict": {"passed": False, "message": "row count: 1 vs 2"},
        }
    }
    write_rows(layout, "agent_runs", [run], model=NAO, run_date=DAY3)
    write_rows(layout, "grades", [grade], model=NAO, run_date=DAY3)
    server, thread = start(layout)
    yield server, grade
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_the_run_page_of_a_nao_agent_run_shows_naos_verification(server):
    server, grade = server
    reply = fetch(server, f"/run/{run_id(grade['name'], NAO, DAY3, 0)}")
    assert reply.status == 200
    text = reply.text
    assert "nao&#x27;s verification" in text or "nao's verification" in text
    section = text.split('id="nao-verification"')[1].split("</section>")[0]
    assert "row count: 1 vs 2" in section and "failed" in section
    assert f"(ours: {grade['status']})" in section
    assert "SUM(net_revenue_usd)" in section


def test_another_agents_run_page_has_no_such_section(server):
    server, grade = server
    reply = fetch(server, f"/run/{run_id(grade['name'], GPT, DAY3, 0)}")
    assert reply.status == 200 and 'id="nao-verification"' not in reply.text

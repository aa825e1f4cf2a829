"""The run page's audit panel: the semantic check, the failure kind and the reference's warnings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval_pipeline.store import write_rows
from eval_pipeline.viewer import ViewerServer, run_id
from eval_pipeline_tests.viewer.conftest import fetch, start
from eval_pipeline_tests.viewer.history import CASES, DAY3, HOSTILE, _run_and_grade, build_store

AUDITED, PLAIN = "local:audited", "local:plain"
AUDIT_DETAILS = {
    "semantic": {
        "status": "failed",
        "message": "matches on the warehouse but not on variant 3: ...",
        "variant": 3,
    },
    "failure_kind": "filter",
    "failure_detail": "misses the filter status <> 'cancelled'",
    "reference_warnings": [{"kind": "current_date", "message": HOSTILE}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewerServer]:
    """A store with one failed run of each model, its data check holding these details."""
    layout = build_store(tmp_path_factory.mktemp("audit") / ".eval")
    for model, details in ((AUDITED, AUDIT_DETAILS), (PLAIN, {"actual_data": []})):
        run, grade, _ = _run_and_grade(CASES[0], model, DAY3, 0)
        check = {"kind": "data", "status": "failed", "message": "", "details": details}
        grade.update(status="failed", passed=False, checks=[check])
        write_rows(layout, "agent_runs", [run], model=model, run_date=DAY3)
        write_rows(layout, "grades", [grade], model=model, run_date=DAY3)
    server, thread = start(layout)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def run_page(server: ViewerServer, model: str) -> str:
    reply = fetch(server, f"/run/{run_id(CASES[0]['name'], model, DAY3, 0)}")
    assert reply.status == 200, reply.text
    return reply.text


def audit_section(page: str) -> str | None:
    parts = page.split('id="audit"')
    return parts[1].split("</section>")[0] if len(parts) > 1 else None


def test_a_failed_run_shows_its_semantic_verdict_kind_and_reference_warnings(server):
    html = audit_section(run_page(server, AUDITED))
    assert html is not None
    assert "not on variant 3" in html
    assert "<code>filter</code>" in html and "status &lt;&gt; &#x27;cancelled&#x27;" in html
    assert "<code>current_date</code>" in html
    assert "<script>" not in html  # a warning's text is escaped like any stored text


def test_a_run_without_any_of_them_shows_no_panel(server):
    assert audit_section(run_page(server, PLAIN)) is None

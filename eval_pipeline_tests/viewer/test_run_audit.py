"""The run page's audit panel: the semantic check, the failure kind and the reference's warnings."""

from __future__ import annotations

from eval_pipeline.viewer._run_page import audit_panel  # an internal piece of the run page
from eval_pipeline_tests.viewer.history import HOSTILE


def run_with(details: dict) -> dict:
    return {"checks": [{"kind": "data", "status": "failed", "message": "", "details": details}]}


def test_a_failed_run_shows_its_semantic_verdict_kind_and_reference_warnings():
    html = audit_panel(
        run_with(
            {
                "semantic": {
                    "status": "failed",
                    "message": "matches on the warehouse but not on variant 3: ...",
                    "variant": 3,
                },
                "failure_kind": "filter",
                "failure_detail": "misses the filter status <> 'cancelled'",
                "reference_warnings": [{"kind": "current_date", "message": HOSTILE}],
            }
        )
    )
    assert html is not None
    assert "not on variant 3" in html
    assert "<code>filter</code>" in html and "status &lt;&gt; &#x27;cancelled&#x27;" in html
    assert "<code>current_date</code>" in html
    assert "<script>" not in html  # a warning's text is escaped like any stored text


def test_a_run_without_any_of_them_shows_no_panel():
    assert audit_panel(run_with({"actual_data": []})) is None
    assert audit_panel({"checks": []}) is None

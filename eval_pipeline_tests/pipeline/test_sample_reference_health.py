"""Reference health on the bundled sample suite: its two empty-on-purpose references do not warn."""

from __future__ import annotations

import pytest

from eval_pipeline.pipeline import EXPECTED_EMPTY_TAG, REFERENCE_LIMITS, references_by_database
from eval_pipeline.suite import load_suite

pytestmark = pytest.mark.slow


def test_only_untagged_problems_warn_on_the_sample_suite(sample_warehouse):
    suite = load_suite(sample_warehouse.path.parent)
    results = references_by_database(suite.config, suite.cases, REFERENCE_LIMITS, previous={})
    by_name = {r.name: r for r in results}
    expected_empty = [c.name for c in suite.cases if EXPECTED_EMPTY_TAG in c.tags]
    assert len(expected_empty) == 2
    for name in expected_empty:
        assert by_name[name].rows == [] and by_name[name].error is None
        assert not any(w["kind"] == "no_rows" for w in by_name[name].warnings), name
    # no reference of the sample suite is empty by mistake, cut through ties or unstable
    kinds = {w["kind"] for r in results for w in r.warnings}
    assert kinds <= {"current_date"}, {r.name: r.warnings for r in results if r.warnings}

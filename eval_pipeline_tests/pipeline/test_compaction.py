"""The `compact_store` job: the nightly compaction through Dagster, and reuse after it."""

from __future__ import annotations

from datetime import timedelta

from eval_pipeline.store import (
    _compact,
    current_generation,
    query,
)  # the unit itself: _compact's margin patched
from eval_pipeline_tests.pipeline.small_suite import (
    MODELS,
    QUIET,
    agent_requests,
    evaluate,
    prepare,
)


def test_the_compaction_job_keeps_the_results_and_the_reuse(small_suite, instance, monkeypatch):
    defs = prepare(small_suite, instance, run_config=QUIET)
    evaluate(defs, instance, MODELS[0], run_config=QUIET)
    sql = "SELECT name, model, attempt, status FROM grades ORDER BY ALL"
    before = query(small_suite.layout, sql).values.tolist()
    history = query(small_suite.layout, "SELECT count(*) AS n FROM grades_history").n[0]
    assert before

    monkeypatch.setattr(_compact, "SAFETY_MARGIN", timedelta(0))  # fold what was just written
    job = defs.resolve_job_def("compact_store")
    assert job.execute_in_process(instance=instance, run_config=QUIET).success
    assert current_generation(small_suite.layout) is not None
    assert query(small_suite.layout, sql).values.tolist() == before

    # The next materialization finds the runs in the segment and makes none again.
    requests = agent_requests(small_suite.agent)
    evaluate(defs, instance, MODELS[0], run_config=QUIET)
    assert agent_requests(small_suite.agent) == requests
    assert query(small_suite.layout, sql).values.tolist() == before
    assert query(small_suite.layout, "SELECT count(*) AS n FROM grades_history").n[0] > history
    schedule = defs.resolve_schedule_def("compact_store")
    assert schedule.cron_schedule == "0 3 * * *"

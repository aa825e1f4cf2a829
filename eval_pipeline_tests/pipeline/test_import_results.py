"""A team's results files brought into the store as past days: idempotent, bad files named and
skipped whole, the rows queryable in SQL like our own."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from eval_pipeline.grading import Grader
from eval_pipeline.pipeline import (
    build_results,
    grade_partition,
    import_results,
    read_results_file,
    write_results_file,
)
from eval_pipeline.store import StateFolder, ensure_schema_files, query, write_rows
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.pipeline.graded_rows import MODEL, row
from eval_pipeline_tests.suite.nao_project import write_nao_project

NAO_FILE = Path(__file__).parent / "nao_results" / "results_20260105_143022.json"
DAY = date(2026, 1, 5)


@pytest.fixture
def layout(tmp_path: Path) -> StateFolder:
    return StateFolder(tmp_path / "shop" / ".eval")


def _grades(layout: StateFolder) -> list[tuple]:
    frame = query(
        layout,
        "SELECT name, model, run_date, attempt, status, passed, message, "
        "cost_usd IS NULL AS cost_unknown "
        "FROM grades ORDER BY name, attempt",
    )
    return [tuple(row) for row in frame.itertuples(index=False)]


def test_a_nao_results_file_becomes_its_day_in_sql_and_a_second_import_adds_nothing(
    layout, tmp_path
):
    first = import_results([NAO_FILE], layout=layout)
    assert (first.imported, first.runs, first.days, first.skipped) == ([NAO_FILE], 4, [DAY], [])

    grades = _grades(layout)
    assert [(g[0], g[3], g[4], g[6]) for g in grades] == [
        ("order_count", 0, "failed", "values differ"),
        ("order_count", 1, "error", "error"),
        ("total_revenue", 0, "passed", "match"),
        ("total_revenue", 1, "passed", "match (approximate)"),
    ]
    assert {(g[1], g[2].date() if hasattr(g[2], "date") else g[2]) for g in grades} == {
        ("vllm:qwen3", DAY)  # nao's model spelling in our form, the file's day
    }
    assert all(g[7] for g in grades)  # nao's `cost: 0` behind a self-hosted model is unknown
    summary = query(
        layout,
        "SELECT model, run_date, pass_rate, total, errors, cost_usd, cost_complete "
        "FROM model_summaries",
    ).to_dict("records")
    assert len(summary) == 1 and summary[0]["pass_rate"] == 0.5
    assert (summary[0]["total"], summary[0]["errors"], summary[0]["cost_complete"]) == (4, 1, False)
    calls = query(layout, "SELECT tool, arguments->>'sql_query' AS sql FROM tool_calls")
    assert list(calls["tool"]) == ["execute_sql"] * 3
    runs = query(layout, "SELECT final_text, status FROM agent_runs WHERE name = 'order_count'")
    assert sorted(runs["status"]) == ["completed", "error"]

    again = import_results([NAO_FILE], layout=layout)
    renamed = tmp_path / "copy_of_results.json"  # the same content under another name
    shutil.copy(NAO_FILE, renamed)
    copy = import_results([renamed], layout=layout)
    assert (again.imported, again.already_imported, again.runs) == ([], [NAO_FILE], 0)
    assert copy.already_imported == [renamed]
    assert _grades(layout) == grades  # no duplicate


def test_a_broken_file_is_named_and_skipped_whole_and_the_others_still_come_in(layout, tmp_path):
    truncated = tmp_path / "results_20260103_000000.json"
    truncated.write_text(NAO_FILE.read_text()[:500])
    half_bad = tmp_path / "results_20260104_000000.json"
    document = json.loads(NAO_FILE.read_text())
    document["timestamp"] = "2026-01-04T09:00:00"
    del document["results"][2]["passed"]  # the third of four results is malformed
    half_bad.write_text(json.dumps(document))
    not_results = tmp_path / "package.json"
    not_results.write_text('{"name": "web"}')

    report = import_results([truncated, half_bad, NAO_FILE, not_results], layout=layout)

    assert report.imported == [NAO_FILE]
    assert [(path.name, why) for path, why in report.skipped] == [
        (
            truncated.name,
            "is not JSON (line 22, column 2: Expecting property name enclosed in double quotes)",
        ),
        (half_bad.name, "results[2].passed: expected true or false, got null"),
        (not_results.name, "has no `results` list; is it a results_*.json file?"),
    ]
    days = query(layout, "SELECT DISTINCT run_date FROM grades")["run_date"]
    assert [d.date() if hasattr(d, "date") else d for d in days] == [DAY]  # nothing of 01-04


def test_our_own_results_file_and_a_second_file_of_the_same_day_add_attempts(layout, tmp_path):
    ours = {
        "timestamp": "2026-01-06T08:00:00",
        "run_date": "2026-01-05",
        "results": [
            {
                "name": "order_count",
                "model": "vllm:qwen3",
                "passed": True,
                "status": "passed",
                "attempt": 0,
                "message": "match",
                "verified": True,
                "tokens": 900,
                "cost": None,
                "duration_ms": 1500,
                "tool_call_count": 0,
                "run_date": "2026-01-05",
                "details": {"tool_calls": [], "checks": []},
            }
        ],
    }
    path = tmp_path / "results_20260106_080000.json"
    path.write_text(json.dumps(ours))
    import_results([NAO_FILE], layout=layout)
    report = import_results([path], layout=layout)
    assert report.runs == 1
    rows = query(
        layout,
        "SELECT attempt, status FROM grades WHERE name = 'order_count' ORDER BY attempt",
    )
    assert [tuple(r) for r in rows.itertuples(index=False)] == [
        (0, "failed"),
        (1, "error"),
        (2, "passed"),  # after the attempts the day already held
    ]
    rate = query(layout, "SELECT pass_rate FROM model_summaries")["pass_rate"]
    assert list(rate) == [pytest.approx(3 / 5)]


def test_an_import_stopped_half_way_is_completed_not_doubled(layout):
    digest = read_results_file(NAO_FILE).digest
    ensure_schema_files(layout)
    # A crash after the runs were written, before their grades.
    partial = {"key": f"import:{digest}:0", "name": "total_revenue", "model": "vllm:qwen3"}
    row = {**partial, "run_date": DAY, "attempt": 0, "status": "completed"}
    write_rows(layout, "agent_runs", [row], model="vllm:qwen3", run_date=DAY)

    report = import_results([NAO_FILE], layout=layout)

    assert report.runs == 4
    counts = query(
        layout, "SELECT (SELECT count(*) FROM agent_runs) AS runs, count(*) AS grades FROM grades"
    )
    assert counts.to_dict("records") == [{"runs": 4, "grades": 4}]


def test_a_run_of_ours_the_store_already_holds_is_not_added_again(layout, tmp_path):
    """The results file `eval-pipeline test` wrote names each run's key: importing it into
    the store that made it adds nothing; a run the store does not hold still comes in."""
    import_results([NAO_FILE], layout=layout)
    stored = query(layout, "SELECT key FROM agent_runs WHERE name = 'order_count' AND attempt = 0")
    key = stored["key"].iloc[0]
    result = {
        "name": "order_count",
        "model": "vllm:qwen3",
        "passed": False,
        "status": "failed",
        "attempt": 0,
        "message": "row count differs",
        "run_date": "2026-01-05",
        "details": {"tool_calls": [], "checks": []},
    }
    path = tmp_path / "results_20260105_090000.json"
    path.write_text(json.dumps({"results": [{**result, "run_key": key}]}))
    before = _grades(layout)

    report = import_results([path], layout=layout)

    assert (report.runs, report.already_imported) == (0, [path])
    assert _grades(layout) == before
    path.write_text(json.dumps({"results": [{**result, "run_key": "elsewhere"}]}))
    assert import_results([path], layout=layout).runs == 1
    assert len(_grades(layout)) == len(before) + 1


def test_a_value_the_store_cannot_hold_skips_its_file_before_anything_is_written(layout, tmp_path):
    """Text JSON allows but UTF-8 does not (a lone surrogate) fails the store's own
    conversion: found while checking the file, not half way through its writes."""
    document = json.loads(NAO_FILE.read_text())
    document["results"][1]["details"]["tool_calls"][0]["result"] = {"note": "\udfff"}
    path = tmp_path / "results_20260105_000000.json"
    path.write_text(json.dumps(document))

    report = import_results([path], layout=layout)

    assert report.runs == 0 and [p for p, _ in report.skipped] == [path]
    assert report.skipped[0][1].startswith("results[1]: cannot be stored (agent_runs.tool_calls:")
    assert _grades(layout) == []


def test_regrading_an_imported_day_keeps_the_imported_grades(layout, tmp_path):
    """Grades re-materialized on a day of imported history (a new tolerance marks them stale
    in the UI): the imported runs are not ours to grade again, and their grades stay."""
    project = write_nao_project(tmp_path / "project")
    suite = load_suite(project)
    import_results([NAO_FILE], layout=layout)
    before = _grades(layout)

    grades = asyncio.run(
        grade_partition(
            suite, "vllm:qwen3", DAY, layout=layout, grader=Grader(extraction="last_query")
        )
    )

    assert grades == [] and _grades(layout) == before


def test_a_results_file_we_write_reads_back_as_the_documents_runs(tmp_path):
    """The file `eval-pipeline test` writes is the document's JSON; reading it for an import
    gives each result's run as the document holds it, with its key and its checks."""
    check = {"kind": "data", "status": "failed", "message": "row count differs", "details": {}}
    call = {"id": "c1", "name": "execute_sql", "arguments": {"sql_query": "SELECT 1"}}
    rows = [
        {**row("total_revenue", 0, "passed", cost=0.5), "run_key": "k-rev", "final_text": "42"},
        {**row("order_count", 0, "failed"), "run_key": "k-orders", "checks": [check]},
        {**row("order_count", 1, "error"), "run_tool_calls": [{**call, "result": "boom"}]},
    ]
    document = build_results(rows, [MODEL], ["total_revenue", "order_count"], DAY)
    path = write_results_file(document.labelled(lambda m: f"openaiCompatible/{m}"), tmp_path)

    runs = read_results_file(path).runs

    assert [(r.name, r.model, r.label, r.attempt) for r in runs] == [
        (e.name, e.model, f"openaiCompatible/{e.model}", e.attempt) for e in document.results
    ]
    assert [(r.status, r.passed, r.message, r.run_key) for r in runs] == [
        (e.status, e.passed, e.message, e.run_key) for e in document.results
    ]
    assert [(r.tokens, r.cost_usd, r.duration_ms, r.run_date) for r in runs] == [
        (e.tokens, e.cost_usd, e.duration_ms, e.run_date) for e in document.results
    ]
    assert [r.checks for r in runs] == [list(e.details.checks) for e in document.results]
    assert [r.error for r in runs] == [None, None, "Request failed: 502 Bad Gateway"]
    assert runs[0].final_text == "42" and {r.source for r in runs} == {"eval_pipeline"}
    assert [c["name"] for c in runs[2].tool_calls] == ["execute_sql"]
    assert runs[2].tool_calls[0]["arguments"] == {"sql_query": "SELECT 1"}


def test_a_results_file_holds_each_result_on_a_line_of_its_own(tmp_path):
    """`grep` finds a run's whole record in the file: one line, itself JSON."""
    rows = [
        {**row("total_revenue", 0, "passed"), "run_key": "k-rev", "final_text": "4\n2"},
        {**row("order_count", 0, "failed"), "run_key": "k-orders"},
    ]
    document = build_results(rows, [MODEL], ["total_revenue", "order_count"], DAY)
    path = write_results_file(document, tmp_path)

    lines = path.read_text(encoding="utf-8").splitlines()
    for entry in document.results:
        [line] = [line for line in lines if f'"run_key": "{entry.run_key}"' in line]
        record = json.loads(line.strip().removesuffix(","))
        assert (record["name"], record["status"]) == (entry.name, entry.status)
    assert json.loads(path.read_text(encoding="utf-8")) == json.loads(
        json.dumps(document.to_json())
    )

"""The real `eval-pipeline` console script running a small suite end to end, offline.

The suite is `replay_suite.py`'s: four tests on a DuckDB `orders` table, `last_query`
extraction (no judge needed), and hand-written recordings played back as `replay:` models
(`good` right on every test, `mixed` wrong on `top_customer`, `drift` rewritten from `good`
to `mixed` before the second day).

One suite is shared by the module (each `eval-pipeline test` is a few seconds of Dagster
work), in the suite-local Dagster instance `<suite>/.eval/dagster_home`. Tests that change
the suite (the regression, the cache) come last and touch only what they own.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.cli.replay_suite import (
    CASES,
    DAY,
    FAILED_BY_MIXED,
    FIRST_MODELS,
    FIRST_MODELS_ARGS,
    FORMULA,
    HYPERLINK,
    MIXED,
    NEXT_DAY,
    rekey,
    write_suite,
)

pytestmark = pytest.mark.slow

ANSI = re.compile(r"\x1b\[")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("cli") / "suite")


@pytest.fixture(scope="module")
def good_json(suite: Path) -> subprocess.CompletedProcess[str]:
    """The first evaluation of the suite: two models, all right, as JSON. `drift`'s results
    are the baseline of the regression test."""
    result = run_cli("test", "--date", DAY, "--format", "json", *FIRST_MODELS_ARGS, cwd=suite)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def mixed_pretty(suite: Path, good_json) -> subprocess.CompletedProcess[str]:
    return run_cli("test", "--date", DAY, "-m", "replay:mixed", cwd=suite)


@pytest.fixture(scope="module")
def two_models_junit(suite: Path, mixed_pretty, tmp_path_factory) -> tuple[int, Path]:
    path = tmp_path_factory.mktemp("junit") / "results.xml"
    result = run_cli(
        "test",
        "--date",
        DAY,
        *("-m", "replay:mixed", "-m", "replay:good", "-k", "2"),
        *("--format", "junit", "-o", str(path)),
        cwd=suite,
    )
    assert "results written to" in result.stderr, result.stderr
    assert result.stdout == ""
    return result.returncode, path


@pytest.fixture(scope="module")
def two_models_pretty(suite: Path, two_models_junit) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "test", "--date", DAY, "-m", "replay:mixed", "-m", "replay:good", "-k", "2", cwd=suite
    )


# --- exit codes and gates ---------------------------------------------------------------


def test_all_passing_run_exits_0_in_the_suite_local_dagster_instance(suite, good_json):
    document = json.loads(good_json.stdout)
    assert document["summary"]["passed"] == document["summary"]["total"] == 2 * len(CASES)
    home = suite / ".eval" / "dagster_home"
    assert (home / "dagster.yaml").is_file()


def test_a_failing_run_exits_1_and_names_the_test_in_plain_text(mixed_pretty):
    assert mixed_pretty.returncode == 1, mixed_pretty.stderr
    out = mixed_pretty.stdout
    assert not ANSI.search(out), "stdout is not a terminal: no escape codes expected"
    row = next(line for line in out.splitlines() if line.strip().startswith(FAILED_BY_MIXED))
    assert "✗ fail" in row and "column 'customer' differs at row 0: actual 'cy'" in row
    assert "3/4 passed (75.0%), 1 failed" in out


def test_verbose_shows_each_run_as_nao_test_prints_it_before_the_tables(suite, mixed_pretty):
    result = run_cli("test", "--date", DAY, "-m", "replay:mixed", "-v", cwd=suite)
    assert result.returncode == 1, result.stderr
    before_tables = result.stdout.split("Results\n")[0]
    assert f"── {FAILED_BY_MIXED} [replay:mixed] attempt 0" in before_tables
    assert f"prompt: {CASES[FAILED_BY_MIXED][0]}" in before_tables
    assert "verification SQL: SELECT 'cy' AS customer" in before_tables
    assert "differing rows:" in before_tables
    assert "3/4 passed (75.0%), 1 failed" in result.stdout


@pytest.mark.parametrize(
    ("mode", "minimum", "code"),
    [
        ("average", "0.5", 0),  # mean of 1, 1, 1, 0 = 0.75 ≥ 0.5
        ("all", "0.5", 1),  # top_customer's 0.0 < 0.5
        ("average", "0.9", 1),
        ("all", "0.9", 1),
    ],
)
def test_min_accuracy_gate_in_both_threshold_modes(suite, mixed_pretty, mode, minimum, code):
    result = run_cli(
        "test",
        *("--date", DAY, "-m", "replay:mixed", "-q"),
        *("--min-accuracy", minimum, "--threshold-mode", mode),
        cwd=suite,
    )
    assert result.returncode == code, result.stdout + result.stderr
    if mode == "all":
        assert f"1 test(s) below threshold {float(minimum):.1%}" in result.stderr
        assert f"{FAILED_BY_MIXED} [replay:mixed]: 0.0%" in result.stderr
    else:
        verdict = "meets" if code == 0 else "is below"
        assert f"average accuracy 75.0% {verdict} the minimum" in result.stderr


def test_a_bad_test_file_exits_2_naming_file_and_field(tmp_path):
    root = tmp_path / "broken_suite"
    (root / "cases").mkdir(parents=True)
    (root / "eval_config.yaml").write_text("test:\n  models: [replay:good]\n")
    (root / "cases" / "fine.yml").write_text("prompt: Hello?\n")
    (root / "cases" / "broken.yml").write_text("prompt: Hi\ncomparison: {decimals: two}\n")
    result = run_cli("test", cwd=root)
    assert result.returncode == 2
    assert "cases/broken.yml:2: comparison.decimals: expected an integer" in result.stderr
    assert "nothing was run" in result.stderr
    no_traceback(result)
    assert not (root / ".eval").exists(), "nothing may run (or be created) for an invalid suite"


def test_an_unknown_model_exits_2_listing_what_is_configured(suite):
    result = run_cli("test", "-m", "replay:goood", "-m", "mistral:large-x", cwd=suite)
    assert result.returncode == 2
    assert "nothing was run" in result.stderr
    assert "'replay:goood': no recording recordings/goood.jsonl" in result.stderr
    assert "recordings: replay:drift, replay:good, replay:mixed" in result.stderr
    assert (
        "provider 'mistral' is not under llm.providers; configured: openai, anthropic"
        in result.stderr
    )
    no_traceback(result)


def test_an_unknown_selection_exits_2_listing_the_tests(suite):
    result = run_cli("test", "-s", "top_costumer", cwd=suite)
    assert result.returncode == 2
    assert f"available tests: {', '.join(sorted(CASES))}" in result.stderr
    assert "top_costumer" in result.stderr
    no_traceback(result)


# --- machine-readable outputs -------------------------------------------------------------


def test_json_stdout_is_only_the_document_with_nao_keys_and_ours(suite, good_json):
    document = json.loads(good_json.stdout)  # the whole stdout parses
    assert "→ evaluating replay:good" in good_json.stderr  # progress went to stderr
    assert {"timestamp", "results", "summary", "by_model"} <= document.keys()
    assert {"pass_metrics", "run_date", "executed_runs", "reused_runs"} <= document.keys()
    assert "pass_metrics_by_test" in document
    assert document["run_date"] == DAY
    # grouped by model in the order given, then the suite's order
    assert [(r["model"], r["name"]) for r in document["results"]] == [
        (model, name) for model in FIRST_MODELS for name in sorted(CASES)
    ]
    for result in document["results"]:
        assert {
            "name",
            "model",
            "passed",
            "message",
            "tokens",
            "cost",
            "duration_ms",
            "tool_call_count",
            "details",
            "status",
            "attempt",
        } <= result.keys()
        assert {
            "response_text",
            "actual_data",
            "expected_data",
            "reference_sql",
            "tool_calls",
        } <= result["details"].keys()
        # nao counts attempts from 1 in its keys (the store from 0).
        assert (result["status"], result["passed"], result["attempt"]) == ("passed", True, 1)
        assert result["tokens"] == 362 and result["cost_usd"] is None  # replays have no price
        assert result["cost"] is None  # unknown: null, as nao writes it
        assert result["tool_call_count"] == 1
    revenue = next(r for r in document["results"] if r["name"] == "total_revenue")
    assert revenue["details"]["reference_sql"] == CASES["total_revenue"][1]
    assert revenue["details"]["tool_calls"][0]["toolName"] == "execute_sql"
    assert revenue["details"]["expected_data"] and revenue["details"]["actual_data"]
    assert document["summary"]["pass_rate"] == 100.0  # nao's percentage
    assert {m["model"] for m in document["by_model"]} == set(FIRST_MODELS)
    assert len(document["pass_metrics_by_test"]) == 2 * len(CASES)
    assert all(m["attempts"] == 1 for m in document["pass_metrics_by_test"])
    assert document["pass_metrics"]["k"] == 1

    written = written_results(good_json.stderr)
    assert written.parent == suite / "outputs"
    # named by the evaluated day, in nao's results_*.json pattern
    assert re.fullmatch(rf"results_{DAY.replace('-', '')}_\d{{6}}\.json", written.name)
    assert json.loads(written.read_text()) == document


def test_junit_file_has_a_suite_per_model_and_a_case_per_attempt(two_models_junit):
    code, path = two_models_junit
    assert code == 1  # mixed fails one test
    root = ET.parse(path).getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"replay:good", "replay:mixed"}
    for model, expected_failures in (("replay:good", 0), ("replay:mixed", 2)):
        testsuite = suites[model]
        cases = testsuite.findall("testcase")
        assert len(cases) == len(CASES) * 2  # one per test × attempt
        assert testsuite.get("tests") == str(len(cases))
        assert testsuite.get("failures") == str(expected_failures)
        assert testsuite.get("errors") == "0"
        assert len(testsuite.findall("testcase/failure")) == expected_failures
    names = [c.get("name") for c in suites["replay:mixed"].findall("testcase")]
    assert FAILED_BY_MIXED in names and f"{FAILED_BY_MIXED} [attempt 1]" in names
    failure = suites["replay:mixed"].find("testcase/failure")
    assert "actual 'cy', expected 'bo'" in failure.get("message")
    assert "diff:" in failure.text and '"customer": "cy"' in failure.text


def test_export_csv_neutralises_formulas_and_keeps_numbers(suite, good_json):
    result = run_cli(
        "export", "--format", "csv", "--date", DAY, "--model", "replay:good", cwd=suite
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    replies = {row["name"]: row["response_text"] for row in rows}
    assert replies["customer_count"] == "'" + FORMULA
    assert replies["order_count"] == "'" + HYPERLINK
    assert replies["total_revenue"] == "Here is the figure."
    assert not any(value.startswith(("=", "+", "@")) for row in rows for value in row.values())
    for row in rows:
        assert row["tokens"] == "362"  # a number, not "'362"
        assert row["attempt"].isdigit() and row["duration_ms"].isdigit()


# --- what a person reads ------------------------------------------------------------------


def test_two_models_with_k_2_show_ranking_grid_and_pass_at_k(two_models_pretty):
    assert two_models_pretty.returncode == 1
    out = two_models_pretty.stdout
    assert not ANSI.search(out)
    ranking = out[out.index("Performance by Model") :]
    # ranked by pass rate, not in the order the models were given
    assert ranking.index("replay:good") < ranking.index("replay:mixed")
    assert "100.0%" in ranking and "75.0%" in ranking
    grid = out[out.index("Pass / Fail by Test and Model") :]
    grid_row = next(line for line in grid.splitlines() if line.strip().startswith(FAILED_BY_MIXED))
    assert "✓" in grid_row and "0/2" in grid_row
    assert "pass@k by Test and Model" in out
    pass_at_k = out[out.index("pass@k by Test and Model") :]
    row = next(
        line
        for line in pass_at_k.splitlines()
        if FAILED_BY_MIXED in line and "replay:mixed" in line
    )
    assert "0/2" in row

    document = json.loads(written_results(out + two_models_pretty.stderr).read_text())
    assert all(m["attempts"] == 2 for m in document["pass_metrics_by_test"])
    # pass^k in the summary line (nao #1248): 7 of 8 (test, model) pairs passed both attempts
    assert "pass^k 0.88 (k=2)" in out and "cost unknown" in out
    assert len(document["results"]) == len(CASES) * 2 * 2
    assert [m["model"] for m in document["by_model"]] == ["replay:good", "replay:mixed"]


def test_sql_prints_summaries_as_csv_and_a_bad_query_exits_2(suite, mixed_pretty):
    result = run_cli(
        "sql",
        "SELECT model, run_date, pass_rate FROM model_summaries ORDER BY run_date, model",
        "--format",
        "csv",
        cwd=suite,
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["model", "run_date", "pass_rate"]
    by_model = {row[0]: (row[1], float(row[2])) for row in rows[1:] if row[1] == DAY}
    assert by_model["replay:good"] == (DAY, 1.0)
    assert by_model["replay:mixed"] == (DAY, 0.75)

    bad = run_cli("sql", "SELECT no_such_column FROM model_summaries", cwd=suite)
    assert bad.returncode == 2
    assert "no_such_column" in bad.stderr and "Binder Error" in bad.stderr
    no_traceback(bad)


def test_runs_are_in_the_dagster_instance_the_ui_shows(suite, good_json):
    import dagster as dg

    home = suite / ".eval" / "dagster_home"
    key = dg.MultiPartitionKey({"model": "replay:good", "date": DAY})
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert "replay:good" in instance.get_dynamic_partitions("models")
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("agent_runs"), asset_partitions=[str(key)]),
            limit=50,
        ).records
        assert records, "no agent_runs materialization for the partition"
        first = records[-1]  # newest first: the last is good_json's, which ran every test
        assert first.asset_materialization.metadata["executed"].value == len(CASES)
        # Work done outside a run, tagged as the command's.
        assert first.asset_materialization.tags.get("eval_pipeline/source") == "cli"


# --- changes over time (these tests edit the suite; they come last) ------------------------


def test_a_test_that_got_worse_is_reported_as_regressed(suite, good_json):
    (suite / "recordings" / "drift.jsonl").write_text(MIXED)  # the model got worse
    rekey(suite, "drift")
    second = run_cli("test", "--date", NEXT_DAY, "-m", "replay:drift", cwd=suite)
    assert second.returncode == 1
    assert f"regressed since the previous run of replay:drift: {FAILED_BY_MIXED}" in second.stdout

    diff = run_cli("diff", "--base", DAY, "--date", NEXT_DAY, cwd=suite)
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert f"replay:drift: {DAY} → {NEXT_DAY}" in diff.stdout
    assert f"regressed (1): {FAILED_BY_MIXED}" in diff.stdout
    assert "improved (0)" in diff.stdout


def test_unchanged_rerun_executes_nothing_and_an_edited_test_reruns_alone(suite, good_json):
    again = run_cli("test", "--date", DAY, cwd=suite)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"No agent run executed: all {len(CASES)} runs reused" in again.stdout
    document = json.loads(written_results(again.stdout + again.stderr).read_text())
    assert (document["executed_runs"], document["reused_runs"]) == (0, len(CASES))

    path = suite / "cases" / "order_count.yml"
    case = yaml.safe_load(path.read_text())
    case["prompt"] = "How many orders were placed in total?"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    rekey(suite, "good")  # the recording answers the edited question
    edited = run_cli("test", "--date", DAY, "--format", "json", "-q", cwd=suite)
    assert edited.returncode == 0, edited.stderr
    document = json.loads(edited.stdout)
    assert (document["executed_runs"], document["reused_runs"]) == (1, len(CASES) - 1)

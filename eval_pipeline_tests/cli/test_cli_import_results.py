"""`eval-pipeline import-results` on a nao project: a team's history in, twice without
duplicates; a broken file (or one bad field of it) named and skipped whole (exit 2), the
others in; nao's attempts, reference SQL and time kept; and `eval-pipeline test` after an
import runs its own tests and names nao's grading rules as the cause of a changed verdict."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from eval_pipeline.pipeline import today
from eval_pipeline_tests.agents.servers import ScriptedServer
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, by_prompt, write_nao_project

pytestmark = pytest.mark.slow  # evaluations through the command line

NAO_FILE = Path(__file__).parents[1] / "pipeline" / "nao_results" / "results_20260105_143022.json"


def _nao_document(day: str, time: str = "14:30:22") -> dict:
    """The example nao file, dated `day` (nao dates its runs by the file's `timestamp`)."""
    document = json.loads(NAO_FILE.read_text())
    document["timestamp"] = f"{day}T{time}.123456"
    return document


def _write(path: Path, document: dict) -> str:
    path.write_text(json.dumps(document), "utf-8")
    return path.name


def _test_natively(project: Path, *args: str):
    """`eval-pipeline test` in the project, its model served by the scripted server."""
    return run_cli("test", *args, cwd=project, env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"})


def _count(project: Path) -> str:
    result = run_cli(
        "sql",
        "SELECT count(*) AS n FROM grades WHERE run_date = '2026-01-05'",
        "--format",
        "csv",
        cwd=project,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1]


def test_import_results_brings_a_teams_history_in_once_and_names_a_broken_file(tmp_path):
    project = write_nao_project(tmp_path / "shop")
    outputs = project / "tests" / "outputs"
    shutil.copy(NAO_FILE, outputs / NAO_FILE.name)
    (outputs / "results_20260106_090000.json").write_text(
        '{"timestamp": "2026-01-06T09:00"', "utf-8"
    )
    files = [f"tests/outputs/{p.name}" for p in sorted(outputs.glob("results_*.json"))]

    first = run_cli("import-results", *files, cwd=project)
    no_traceback(first)
    assert first.returncode == 2, first.stdout + first.stderr  # one file was skipped
    assert f"imported tests/outputs/{NAO_FILE.name}" in first.stdout
    assert "4 run(s) from 1 file(s) imported; days: 2026-01-05" in first.stdout
    skipped = first.stderr.strip().splitlines()
    assert len(skipped) == 1, first.stderr
    assert skipped[0].startswith("skipped tests/outputs/results_20260106_090000.json: is not JSON")
    assert _count(project) == "4"

    again = run_cli("import-results", files[0], cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already in the store" in again.stdout and "0 run(s) from 0 file(s)" in again.stdout
    assert _count(project) == "4"  # no duplicate


def test_a_native_run_after_importing_todays_nao_file_runs_its_own_tests(tmp_path):
    """Imported runs are history: a native evaluation of the same day never takes them for
    runs of ours (they have no inputs to match), and needs no --no-cache."""
    day = today()
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        outputs = project / "tests" / "outputs"
        imported = _write(outputs / "results_nao.json", _nao_document(day.isoformat()))
        first = run_cli("import-results", f"tests/outputs/{imported}", cwd=project)
        assert first.returncode == 0, first.stdout + first.stderr
        # the imported file's day, named: a run that crossed midnight would evaluate the next
        native = _test_natively(project, "--date", day.isoformat(), "--format", "json")
    no_traceback(native)
    assert native.returncode == 1, native.stdout + native.stderr  # order_count is wrong
    document = json.loads(native.stdout)
    assert sorted((r["name"], r["attempt"], r["passed"]) for r in document["results"]) == [
        ("order_count", 1, False),
        ("total_revenue", 1, True),
    ]
    assert document["executed_runs"] == 2 and server.requests  # ours ran, none was "reused"

    again = run_cli("import-results", f"tests/outputs/{imported}", cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already in the store" in again.stdout  # the day is ours now; the import is history


def _grades_per_day(project: Path) -> dict[str, int]:
    result = run_cli(
        "sql",
        "SELECT CAST(run_date AS VARCHAR) AS day, count(*) AS n FROM grades GROUP BY day",
        "--format",
        "json",
        cwd=project,
    )
    assert result.returncode == 0, result.stderr
    return {row["day"]: row["n"] for row in json.loads(result.stdout)}


@pytest.mark.parametrize(
    ("where", "value", "reason"),
    [
        (("duration_ms",), "abc", 'results[3].duration_ms: expected a number, got "abc"'),
        (
            ("details", "tool_calls", 0, "duration_ms"),
            [1],
            "results[0].details.tool_calls[0].duration_ms: expected a number, got [1]",
        ),
        (("tokens",), 1e300, "results[3].tokens: expected a whole number of tokens"),
    ],
)
def test_a_file_with_one_bad_field_is_skipped_whole_naming_it_and_the_others_come_in(
    tmp_path, where, value, reason
):
    project = write_nao_project(tmp_path / "shop")
    good1 = _write(project / "good1.json", _nao_document("2026-01-05"))
    bad = _nao_document("2026-01-06")
    target = bad["results"][3 if where[0] != "details" else 0]
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    bad_name = _write(project / "bad.json", bad)
    good2 = _write(project / "good2.json", _nao_document("2026-01-07"))

    result = run_cli("import-results", good1, bad_name, good2, cwd=project)
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"skipped bad.json: {reason}"), result.stderr
    assert "imported good1.json" in result.stdout and "imported good2.json" in result.stdout
    assert _grades_per_day(project) == {"2026-01-05": 4, "2026-01-07": 4}  # nothing of bad.json


def test_a_day_in_the_future_or_before_2000_is_refused_as_date_is(tmp_path):
    project = write_nao_project(tmp_path / "shop")
    future = _write(project / "future.json", _nao_document("9999-12-31"))
    ours = _nao_document("2026-01-05")
    ours["results"][1]["run_date"] = "0001-01-01"
    ancient = _write(project / "ancient.json", ours)

    days = {today()}
    result = run_cli("import-results", future, ancient, cwd=project)
    days.add(today())  # the command's today is one of these, also across midnight
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() in [
        [
            "skipped future.json: timestamp: 9999-12-31 is in the future; the last day that "
            f"can be evaluated is today, {day.isoformat()} (UTC)",
            "skipped ancient.json: results[1].run_date: 0001-01-01 is before 2000-01-01, the "
            "first day that can be evaluated",
        ]
        for day in days
    ], result.stderr
    assert _grades_per_day(project) == {}


def test_naos_attempts_count_from_0_after_the_days_others_and_its_sql_and_time_are_kept(
    tmp_path,
):
    """nao numbers attempts from 1; a second file of the day continues the numbering."""
    project = write_nao_project(tmp_path / "shop")
    morning = _nao_document("2026-01-05", "09:00:00")
    for result, attempt in zip(morning["results"], (1, 2, 1, 2), strict=True):
        result["attempt"] = attempt
    evening = _nao_document("2026-01-05", "18:45:10")
    evening["results"] = [morning["results"][0] | {"attempt": 1}]
    files = (_write(project / "morning.json", morning), _write(project / "evening.json", evening))

    result = run_cli("import-results", *files, cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    query = run_cli(
        "sql",
        "SELECT g.name, g.attempt, r.finished_at, "
        "json_extract_string(g.checks, '$[0].details.reference_sql') AS reference_sql "
        "FROM grades g JOIN agent_runs r ON r.key = g.run_key ORDER BY g.name, g.attempt",
        "--format",
        "json",
        cwd=project,
    )
    assert query.returncode == 0, query.stderr
    rows = [tuple(row.values()) for row in json.loads(query.stdout)]
    assert [(name, attempt) for name, attempt, *_ in rows] == [
        ("order_count", 0),
        ("order_count", 1),
        ("total_revenue", 0),
        ("total_revenue", 1),
        ("total_revenue", 2),
    ]
    assert [str(at)[:19] for _, _, at, _ in rows] == [
        "2026-01-05T09:00:00",
        "2026-01-05T09:00:00",
        "2026-01-05T09:00:00",
        "2026-01-05T09:00:00",
        "2026-01-05T18:45:10",
    ]
    assert rows[1][3] is None  # the error run had no data to compare
    assert rows[0][3] == "SELECT COUNT(*) AS orders FROM orders"
    assert rows[2][3] == "SELECT SUM(amount) AS total_revenue FROM orders"


def test_the_first_native_run_after_naos_results_names_the_grading_rules_not_the_model(tmp_path):
    """nao graded yesterday (in any row order, its own rules); today we grade. A verdict that
    differs is the rules' change, reported as a new judge is: neither regressed nor improved."""
    day = today()
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        yesterday = _nao_document((day - timedelta(days=1)).isoformat())
        yesterday["nao_version"] = "0.3.29"
        for result in yesterday["results"]:  # nao: order_count passed, total_revenue failed
            result["passed"] = result["name"] == "order_count"
            result["error"] = None
        imported = _write(project / "tests" / "outputs" / "results_nao.json", yesterday)
        first = run_cli("import-results", f"tests/outputs/{imported}", cwd=project)
        assert first.returncode == 0, first.stdout + first.stderr
        native = _test_natively(project, "--date", day.isoformat(), "-q")  # the day after nao's
    no_traceback(native)
    assert native.returncode == 1, native.stdout + native.stderr  # order_count is wrong here
    out = " ".join(native.stdout.split())
    assert "regressed since" not in out and "improved since" not in out, out
    assert (
        "changed by grading rules (imported from nao 0.3.29), not by openaiCompatible/vllm:qwen3: "
        "order_count (passed → not passed), total_revenue (not passed → passed)"
    ) in out, out

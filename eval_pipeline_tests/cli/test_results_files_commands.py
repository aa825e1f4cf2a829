"""`eval-pipeline diff FILE FILE | --last` and `eval-pipeline summary` on results files, in
process: nao's `test diff` / `test summary` habits (pairs by test and model, exit 1 on a
regression unless --no-fail) carried over to files of either tool."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline_tests.agents.tiny_suite import write_suite

NAO_MODEL = "openaiCompatible/vllm:qwen3"


def entry(name: str, passed: bool, model: str = NAO_MODEL, **extra) -> dict:
    """A results entry with the fields nao writes for each run."""
    fields = {"tokens": 100, "cost": 0.01, "duration_ms": 1500, "tool_call_count": 2}
    return {"name": name, "model": model, "passed": passed, **fields, **extra}


def write_results(path: Path, *entries: dict, written_at: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"timestamp": "2026-06-01T12:00:00", "results": list(entries)}))
    if written_at is not None:
        os.utime(path, (written_at, written_at))
    return path


@pytest.fixture
def suite(tmp_path):
    return write_suite(tmp_path / "suite", cases={"q0": "What is the revenue?"}, dbt=False)


@pytest.fixture
def two_files(tmp_path):
    before = write_results(
        tmp_path / "before.json",
        entry("revenue", True),
        entry("orders", False),
        entry("churn", True),
        entry("dropped", True),
        entry("revenue", True, model="openai:gpt-a"),
    )
    after = write_results(
        tmp_path / "after.json",
        entry("revenue", False),  # regression
        entry("orders", True),  # fix
        entry("churn", True),  # unchanged
        entry("new_test", True),  # added; `dropped` is removed
        entry("revenue", True, model="openai:gpt-a"),
    )
    return before, after


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_each_test_and_model_is_labelled_and_a_regression_exits_1(two_files, capsys):
    code, out, _ = run(capsys, "diff", *map(str, two_files))
    assert code == 1
    rows = {tuple(line.split()[:2]): line.split()[-1] for line in out.splitlines()[1:-1]}
    assert rows == {
        ("revenue", NAO_MODEL): "regression",
        ("orders", NAO_MODEL): "fix",
        ("churn", NAO_MODEL): "unchanged",
        ("revenue", "openai:gpt-a"): "unchanged",
        ("new_test", NAO_MODEL): "added",
        ("dropped", NAO_MODEL): "removed",
    }
    assert "revenue  " in out.splitlines()[1]  # regressions first
    assert out.splitlines()[-1] == ("Summary: 1 regression, 1 fix, 2 unchanged, 1 added, 1 removed")


def test_no_fail_quiet_and_the_filters(two_files, capsys):
    files = list(map(str, two_files))
    assert run(capsys, "diff", *files, "--no-fail")[0] == 0
    code, out, _ = run(capsys, "diff", *files, "--quiet")
    assert code == 1 and out.splitlines() == [
        "Summary: 1 regression, 1 fix, 2 unchanged, 1 added, 1 removed"
    ]
    # --model in our spelling finds nao's; --test narrows to one test.
    code, out, _ = run(capsys, "diff", *files, "-q", "--model", "vllm:qwen3", "--test", "orders")
    assert (
        code == 0
        and out.strip() == "Summary: 0 regressions, 1 fix, 0 unchanged, 0 added, 0 removed"
    )
    code, out, _ = run(capsys, "diff", *files, "--model", "openai:gpt-a")
    assert code == 0 and "1 unchanged" in out and NAO_MODEL not in out


def test_a_test_passes_in_a_file_when_all_its_attempts_passed(tmp_path, capsys):
    before = write_results(tmp_path / "a.json", entry("t", True), entry("t", True))
    after = write_results(tmp_path / "b.json", entry("t", True), entry("t", False))
    code, out, _ = run(capsys, "diff", str(before), str(after), "-q")
    assert code == 1 and out.startswith("Summary: 1 regression")


def test_last_compares_the_two_files_written_last(suite, capsys):
    outputs = suite / "outputs"
    # Named by the day each evaluated: the newest file evaluated the oldest day.
    write_results(outputs / "results_20260603_090000.json", entry("t", True), written_at=1_000)
    write_results(outputs / "results_20260604_090000.json", entry("t", True), written_at=2_000)
    write_results(outputs / "results_20260101_090000.json", entry("t", False), written_at=3_000)
    code, out, _ = run(capsys, "diff", "--suite", str(suite), "--last")
    assert code == 1
    assert out.splitlines()[0] == (
        f"{outputs / 'results_20260604_090000.json'} → {outputs / 'results_20260101_090000.json'}"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--last", "a.json", "b.json"], "not both"),
        (["only_one.json"], "got 1"),
        (["a.json", "b.json", "--base", "2026-06-01"], "--base and --date compare stored days"),
        (["--last"], "--last needs two results files in"),
        (["--quiet"], "--quiet applies to results files"),
    ],
)
def test_a_wrong_combination_exits_2_with_one_line(suite, capsys, argv, said):
    code, _, err = run(capsys, "diff", "--suite", str(suite), *argv)
    assert code == 2 and err.startswith("error: ") and said in err, err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"runs": []}', "no `results` list"),
        ('{"results": [{"name": "t", "model": "m", "passed": "yes"}]}', "results[0].passed"),
    ],
)
def test_a_bad_file_exits_2_naming_the_file_and_field(tmp_path, capsys, content, said):
    good = write_results(tmp_path / "good.json", entry("t", True))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    code, _, err = run(capsys, "diff", str(good), str(bad))
    assert code == 2 and str(bad) in err and said in err, err
    code, _, err = run(capsys, "summary", "-f", str(bad))
    assert code == 2 and str(bad) in err and said in err, err


def test_summary_totals_and_ranks_models_and_says_when_a_cost_is_unknown(tmp_path, capsys):
    path = write_results(
        tmp_path / "results.json",
        entry("a", True, model="openai:gpt-a"),
        entry("b", False, model="openai:gpt-a"),
        entry("a", True, cost=None),
        entry("b", True, cost=None),
    )
    code, out, _ = run(capsys, "summary", "-f", str(path), "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["file"] == str(path)
    assert {k: summary["summary"][k] for k in ("total", "passed", "failed", "unpriced_runs")} == {
        "total": 4,
        "passed": 3,
        "failed": 1,
        "unpriced_runs": 2,
    }
    assert summary["summary"]["total_cost"] == pytest.approx(0.02)
    assert summary["summary"]["total_duration_s"] == 6.0
    assert [(m["model"], m["pass_rate"]) for m in summary["by_model"]] == [
        (NAO_MODEL, 100.0),
        ("openai:gpt-a", 50.0),
    ]
    code, out, _ = run(capsys, "summary", "-f", str(path))
    first, nao_row, ours_row = out.splitlines()
    assert code == 0 and "3 passed, 1 failed, 4 total, $0.0200 (cost unknown for 2 runs)" in first
    assert "cost unknown" in nao_row and "$0.0200" in ours_row  # never $0 for no price
    assert [m["unpriced_runs"] for m in summary["by_model"]] == [2, 0]


def test_summary_reads_the_file_written_last_by_default(suite, capsys):
    outputs = suite / "outputs"
    write_results(outputs / "results_20260603_090000.json", entry("t", False), written_at=1_000)
    write_results(outputs / "results_20260601_090000.json", entry("t", True), written_at=2_000)
    code, out, _ = run(capsys, "summary", "--suite", str(suite))
    assert code == 0 and out.startswith(f"{outputs / 'results_20260601_090000.json'}: 1 passed")
    assert run(capsys, "summary", "--suite", str(suite.parent / "elsewhere"))[0] == 2


# --- runs that ended in an error ----------------------------------------------------------

CANNOT_CONNECT = "could not connect from POST http://127.0.0.1:9/v1/chat/completions"


def errored(name: str, **extra) -> dict:
    """A run that ended in an error, as nao writes it: not passed, with why (no `status`)."""
    return entry(name, False, error=CANNOT_CONNECT, **extra)


def test_a_pass_that_became_an_error_is_an_error_not_a_regression(tmp_path, capsys):
    before = write_results(
        tmp_path / "before.json",
        entry("revenue", True, status="passed"),
        entry("orders", True),
        entry("churn", False),
        errored("refunds"),
    )
    after = write_results(
        tmp_path / "after.json",
        entry("revenue", False, status="error", error=CANNOT_CONNECT),  # ours says `status`
        errored("orders"),  # nao's says it by `error`
        entry("churn", False),
        entry("refunds", True),  # passes where it had no verdict
    )

    code, out, _ = run(capsys, "diff", str(before), str(after))

    assert code == 0, out  # no regression: nothing is known of the agent's answer now
    lines = out.splitlines()
    assert lines[-1] == "Summary: 0 regressions, 1 fix, 1 unchanged, 0 added, 0 removed, 2 errors"
    rows = {line.split()[0]: " ".join(line.split()[2:]) for line in lines[1:-1]}
    assert rows == {
        "revenue": "PASS → ERROR error",
        "orders": "PASS → ERROR error",
        "churn": "FAIL → FAIL unchanged",
        "refunds": "ERROR → PASS fix",
    }
    # A failed attempt beside an error one is a failure: the agent was wrong at least once.
    # (`status` makes the file ours, as `before` is: graded by the same rules.)
    attempts = write_results(
        tmp_path / "attempts.json",
        entry("orders", False, status="failed"),
        entry("orders", False, status="error", error=CANNOT_CONNECT),
    )
    code, out, _ = run(capsys, "diff", str(before), str(attempts), "--test", "orders", "-q")
    assert code == 1 and out.startswith("Summary: 1 regression"), out


def test_summary_counts_runs_in_error_apart_from_failed_ones(tmp_path, capsys):
    path = write_results(
        tmp_path / "results.json",
        entry("a", True),
        entry("b", False),
        errored("c"),
        entry("d", False, status="error", error=CANNOT_CONNECT, model="openai:gpt-a"),
        entry("e", True, model="openai:gpt-a"),
    )

    code, out, _ = run(capsys, "summary", "-f", str(path))

    first, *rows = out.splitlines()
    assert code == 0 and "2 passed, 1 failed, 2 error(s), 5 total" in first, first
    assert f"{NAO_MODEL}  1/3 passed (33.3%)  1 error(s)  pass@1" in rows[1], rows
    code, out, _ = run(capsys, "summary", "-f", str(path), "--json")
    summary = json.loads(out)
    # `failed` stays nao's (every run that did not pass); `errors` says how many were errors.
    assert (summary["summary"]["failed"], summary["summary"]["errors"]) == (3, 2)
    assert [(m["model"], m["errors"]) for m in summary["by_model"]] == [
        ("openai:gpt-a", 1),
        (NAO_MODEL, 1),
    ]


def test_naos_file_pairs_with_naos_agent_and_a_change_of_rules_is_no_regression(tmp_path, capsys):
    """nao's `openaiCompatible/vllm:qwen3` is nao's agent: it pairs with ours
    `nao:openaiCompatible/vllm:qwen3`, not with our built-in agent on the same model; a
    verdict that differs between nao's grading and ours is the rules', exit 0."""
    nao = write_results(tmp_path / "nao.json", entry("t02", True), entry("t03", True))
    ours = write_results(
        tmp_path / "ours.json",
        entry("t02", False, model=f"nao:{NAO_MODEL}", status="failed"),
        entry("t03", True, model=f"nao:{NAO_MODEL}", status="passed"),
        entry("t02", True, model=NAO_MODEL, status="passed"),  # our built-in agent
    )
    code, out, _ = run(capsys, "diff", str(nao), str(ours))
    assert code == 0, out
    rows = {tuple(line.split()[:2]): " ".join(line.split()[2:]) for line in out.splitlines()[1:-1]}
    assert rows == {
        ("t02", f"nao:{NAO_MODEL}"): "PASS → FAIL changed by grading rules (nao)",
        ("t03", f"nao:{NAO_MODEL}"): "PASS → PASS unchanged",
        ("t02", NAO_MODEL): "- → PASS added",
    }
    assert out.splitlines()[-1] == (
        "Summary: 0 regressions, 0 fixes, 1 unchanged, 1 added, 0 removed, "
        "1 changed by grading rules"
    )
    # A file of ours with no run of nao's agent: nao's runs pair with the model's, as an
    # import reads them, and the rules still tell the change apart.
    built_in = write_results(
        tmp_path / "built_in.json", entry("t02", False, status="failed"), entry("t03", True)
    )
    code, out, _ = run(capsys, "diff", str(nao), str(built_in), "-q")
    assert code == 0 and out.strip() == (
        "Summary: 0 regressions, 0 fixes, 1 unchanged, 0 added, 0 removed, "
        "1 changed by grading rules"
    ), out

"""Is the difference real? Through the real `eval-pipeline` script: the results
file's intervals and comparisons, the printed tables, the store's tables and `diff`'s paired
test, on the small suite of `replay_suite.py` (`good` right on all four tests,
`mixed` wrong on `top_customer`)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from eval_pipeline_tests.cli.console import no_traceback, run_cli
from eval_pipeline_tests.cli.replay_suite import (
    DAY,
    FAILED_BY_MIXED,
    MIXED,
    NEXT_DAY,
    rekey,
    write_suite,
)

pytestmark = pytest.mark.slow

TWO_MODELS = ("-m", "replay:mixed", "-m", "replay:good")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_suite(tmp_path_factory.mktemp("stats") / "suite")


@pytest.fixture(scope="module")
def two_models_json(suite: Path) -> dict:
    result = run_cli("test", "--date", DAY, "--format", "json", *TWO_MODELS, cwd=suite)
    assert result.returncode == 1, result.stderr  # mixed fails a test
    return json.loads(result.stdout)


def test_the_results_file_gives_each_pass_rate_its_interval_and_compares_the_models(
    two_models_json,
):
    by_model = {m["model"]: m for m in two_models_json["by_model"]}
    # Wilson 95% intervals in percent, as pass_rate: 4/4 → [51.0, 100], 3/4 → [30.1, 95.4].
    assert by_model["replay:good"]["pass_rate"] == 100.0
    assert by_model["replay:good"]["pass_rate_ci95"] == [51.0, 100.0]
    assert by_model["replay:mixed"]["pass_rate"] == 75.0
    assert by_model["replay:mixed"]["pass_rate_ci95"] == [30.1, 95.4]
    # One pair, ranked first: good passed one test mixed failed; exact McNemar p = 1.
    assert two_models_json["comparisons"] == [
        {
            "model_a": "replay:good",
            "model_b": "replay:mixed",
            "tests": 4,
            "a_only": 1,
            "b_only": 0,
            "p_value": 1.0,
            "p_adjusted": 1.0,
            "significant": False,
        }
    ]


def test_the_report_says_whether_the_difference_is_real(suite, two_models_json):
    result = run_cli("test", "--date", DAY, *TWO_MODELS, cwd=suite)
    no_traceback(result)
    out = result.stdout
    mixed_row = next(line for line in out.splitlines() if line.strip().startswith("replay:mixed "))
    assert "75.0% ± 44.9" in mixed_row  # the farther end of [30.1, 95.4]
    assert out.index("Performance by Model") < out.index("Is the difference real?")
    section = out[out.index("Is the difference real?") :].splitlines()
    pair = next(line for line in section if line.strip().startswith("replay:good "))
    assert pair.split() == ["replay:good", "replay:mixed", "4", "1", "0", "1.000", "1.000", "no"]
    assert "With 4 tests, too few answers differ to tell any difference apart." in out


def test_a_single_model_run_has_no_comparison(suite, two_models_json):
    result = run_cli("test", "--date", DAY, "-m", "replay:good", cwd=suite)
    assert result.returncode == 0, result.stderr
    assert "100.0% ± 49.0" in result.stdout
    assert "Is the difference real?" not in result.stdout


def test_the_store_keeps_the_intervals_and_the_pairs(suite, two_models_json):
    with duckdb.connect(
        str(suite / ".eval" / "results.duckdb"),
        read_only=True,
    ) as connection:
        intervals = connection.execute(
            "SELECT model, round(ci_low, 3), ci_high FROM model_summaries "
            "WHERE run_date = ? ORDER BY model",
            [DAY],
        ).fetchall()
        pairs = connection.execute(
            "SELECT model_a, model_b, tests, a_only, b_only, p_adjusted, significant "
            "FROM model_comparisons WHERE run_date = ?",
            [DAY],
        ).fetchall()
    assert intervals == [
        ("replay:good", 0.51, 1.0),
        ("replay:mixed", 0.301, pytest.approx(0.954, abs=1e-3)),
    ]
    # The leaderboard of the day's last evaluation (one model) rewrote the day's pairs:
    # both models still have results that day, so the pair stands.
    assert pairs == [("replay:good", "replay:mixed", 4, 1, 0, 1.0, False)]


def test_diff_runs_the_paired_test_between_two_days(suite, two_models_json):
    first = run_cli("test", "--date", DAY, "-q", "-m", "replay:drift", cwd=suite)
    assert first.returncode == 0, first.stderr
    (suite / "recordings" / "drift.jsonl").write_text(MIXED)  # the model got worse
    rekey(suite, "drift")
    second = run_cli("test", "--date", NEXT_DAY, "-q", "-m", "replay:drift", cwd=suite)
    assert second.returncode == 1, second.stderr

    diff = run_cli("diff", "--base", DAY, "--date", NEXT_DAY, "--model", "replay:drift", cwd=suite)
    assert diff.returncode == 1, diff.stderr
    assert f"regressed (1): {FAILED_BY_MIXED}" in diff.stdout
    assert (
        "paired test: 0 better, 1 worse on 4 shared tests, p = 1.000 (not significant)"
        in diff.stdout
    )

"""Through the real `eval-pipeline` script: semantic check, failure kinds, reference health.

A suite over the small shop warehouse with `semantic: {variants: 8}` in its `test:` block and
two recorded models: `cheat` answers the count with `max(id)` (right on the warehouse, since
ids run 1..n) and forgets a filter; `good` answers both with equivalent rewrites.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.cli.replay_suite import recording, rekey
from eval_pipeline_tests.grading.small_shop import build_shop

pytestmark = pytest.mark.slow

DAY = "2026-01-01"
COUNT = "SELECT COUNT(*) AS orders FROM orders"
PAID = "SELECT COUNT(*) AS orders FROM orders WHERE status <> 'cancelled'"
NONE_IN_JAPAN = "SELECT id FROM customers WHERE region = 'JP'"
NEGATIVE = "SELECT id FROM orders WHERE amount < 0"
RECENT = "SELECT COUNT(*) AS orders FROM orders WHERE order_date > current_date - INTERVAL 30 DAY"
CASES = {
    "order_count": {"sql": COUNT},
    "paid_orders": {"sql": PAID},
    "orders_from_japan": {"sql": NONE_IN_JAPAN, "tags": ["empty-answer"]},
    "negative_orders": {"sql": NEGATIVE},
    "recent_orders": {"sql": RECENT},
}
CHEAT = {
    **{name: case["sql"] for name, case in CASES.items()},
    "order_count": "SELECT MAX(id) AS orders FROM orders",
    "paid_orders": COUNT,
}
GOOD = {
    **{name: case["sql"] for name, case in CASES.items()},
    "order_count": "SELECT COUNT(status) AS orders FROM orders",
    "paid_orders": "SELECT COUNT(o.id) AS orders FROM orders o WHERE o.status != 'cancelled'",
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("semantic") / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "recordings").mkdir()
    build_shop(root / "warehouse.duckdb")
    config = {
        "test": {
            "models": ["replay:good"],
            "extraction": "last_query",
            "semantic": {"variants": 8, "seed": 0},
        },
        "warehouse": {"type": "duckdb", "path": "warehouse.duckdb"},
    }
    (root / "eval_config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, case in CASES.items():
        text = yaml.safe_dump({"name": name, "prompt": f"{name}?", **case}, sort_keys=False)
        (root / "cases" / f"{name}.yml").write_text(text)
    (root / "recordings" / "cheat.jsonl").write_text(recording(CHEAT, {}))
    (root / "recordings" / "good.jsonl").write_text(recording(GOOD, {}))
    rekey(root, "cheat", "good")
    return root


@pytest.fixture(scope="module")
def evaluated(suite: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = run_cli(
        "test", "--date", DAY, "-m", "replay:cheat", "-m", "replay:good", "--format", "json",
        cwd=suite,
    )  # fmt: skip
    no_traceback(result)
    return result, json.loads(written_results(result.stderr).read_text())


def results_of(document: dict, model: str) -> dict[str, dict]:
    return {r["name"]: r for r in document["results"] if r["model"] == model}


def test_a_coincidental_match_fails_naming_the_variant_and_a_rewrite_passes(evaluated):
    result, document = evaluated
    assert result.returncode == 1, result.stderr
    cheat, good = results_of(document, "replay:cheat"), results_of(document, "replay:good")
    assert cheat["order_count"]["status"] == "failed"
    assert "matches on the warehouse but not on variant 1" in cheat["order_count"]["message"]
    assert cheat["order_count"]["details"]["semantic"]["variant"] == 1
    assert good["order_count"]["passed"] and good["paid_orders"]["passed"]
    assert good["order_count"]["details"]["semantic"]["message"] == "agrees on all 8 variants"


def test_a_failed_query_names_its_kind_in_the_message_and_in_sql(suite, evaluated):
    _, document = evaluated
    paid = results_of(document, "replay:cheat")["paid_orders"]
    assert paid["details"]["failure_kind"] == "filter"
    assert "[filter: misses the filter status <> 'cancelled']" in paid["message"]
    answer = run_cli(
        "sql",
        "SELECT model, failure_kind, count(*) AS runs FROM grades "
        "WHERE failure_kind IS NOT NULL GROUP BY ALL ORDER BY runs DESC, failure_kind",
        "--format",
        "json",
        cwd=suite,
    )
    assert answer.returncode == 0, answer.stderr
    kinds = {(r["model"], r["failure_kind"]) for r in json.loads(answer.stdout)}
    assert ("replay:cheat", "filter") in kinds
    assert all(model == "replay:cheat" for model, _ in kinds)


def test_reference_warnings_reach_each_result_and_an_expected_empty_answer_does_not_warn(
    evaluated,
):
    _, document = evaluated
    good = results_of(document, "replay:good")

    def kinds(name: str) -> list[str]:
        return [w["kind"] for w in good[name]["details"]["reference_warnings"]]

    assert kinds("negative_orders") == ["no_rows"]
    assert kinds("orders_from_japan") == []  # tagged empty-answer
    assert "current_date" in kinds("recent_orders")
    assert kinds("order_count") == []


def test_variants_are_built_once_and_reused(suite, evaluated):
    files = sorted((suite / ".eval" / "variants").rglob("variant_*.duckdb"))
    assert len(files) == 8
    before = {f: f.stat().st_mtime_ns for f in files}
    again = run_cli("test", "--date", DAY, "-m", "replay:good", "--format", "json", cwd=suite)
    assert again.returncode == 0, again.stderr
    assert {f: f.stat().st_mtime_ns for f in files} == before

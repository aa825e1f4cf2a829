"""A run belongs to its test: two tests asking the same question each get their own run.

Real suites repeat prompts (a data test and a consistency test of one question, one question
checked against two references). Through the real CLI, in both orders, the results file, the
store and the viewer count one run per test and attempt.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from eval_pipeline.store import StateFolder, query
from eval_pipeline_tests.cli.console import no_traceback, run_cli, written_results
from eval_pipeline_tests.cli.replay_suite import CASES, recording, rekey, write_suite

pytestmark = pytest.mark.slow

DAY = "2026-03-01"
ORIGINAL, COPY = "total_revenue", "total_revenue_in_cents"
# The same question as ORIGINAL, checked against another reference: the copy must fail where
# the original passes, which it can only do when it is graded on a run of its own.
COPY_SQL = "SELECT SUM(amount) * 100 AS revenue_cents FROM orders"


def suite_with_a_repeated_prompt(root: Path) -> Path:
    write_suite(root)
    prompt, sql = CASES[ORIGINAL]
    (root / "cases" / f"{COPY}.yml").write_text(
        yaml.safe_dump({"name": COPY, "prompt": prompt, "sql": COPY_SQL}, sort_keys=False)
    )
    queries = {name: query_sql for name, (_, query_sql) in CASES.items()}
    (root / "recordings" / "good.jsonl").write_text(recording({**queries, COPY: sql}, {}))
    rekey(root, "good")
    return root


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite with a repeated prompt, written (its recordings keyed) once for the module."""
    return suite_with_a_repeated_prompt(tmp_path_factory.mktemp("identity") / "suite")


@pytest.fixture
def fresh_suite(written: Path, tmp_path: Path) -> Path:
    """A copy of that suite no command has run in yet."""
    return Path(shutil.copytree(written, tmp_path / "suite"))


def stored_runs(root: Path) -> dict[str, int]:
    layout = StateFolder(root / ".eval")
    frame = query(
        layout, "SELECT name, count(*) AS n FROM agent_runs WHERE run_date = ? GROUP BY name", [DAY]
    )
    return dict(zip(frame["name"], frame["n"].astype(int), strict=True))


def stored_grades(root: Path) -> dict[str, bool]:
    layout = StateFolder(root / ".eval")
    frame = query(layout, "SELECT name, passed FROM grades WHERE run_date = ?", [DAY])
    assert frame["name"].is_unique, frame
    return dict(zip(frame["name"], frame["passed"].astype(bool), strict=True))


def viewer_results(root: Path) -> list[str]:
    """The test of each run the viewer's day page shows (one chip per run), as exported."""
    page = run_cli("export", "--format", "html", "--date", DAY, cwd=root)
    assert page.returncode == 0, page.stdout + page.stderr
    titles = re.findall(r'class="chip[^"]*" title="([^"]*)"', page.stdout)
    return sorted(html.unescape(title).split(" · ")[0] for title in titles)


def results_names(result) -> list[str]:
    document = json.loads(written_results(result.stdout + result.stderr).read_text())
    return sorted(r["name"] for r in document["results"])


def test_the_copy_run_alone_after_the_original_gets_its_own_run(fresh_suite):
    root = fresh_suite
    first = run_cli("test", "--date", DAY, "-s", ORIGINAL, cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr

    copy = run_cli("test", "--date", DAY, "-s", COPY, cwd=root)
    no_traceback(copy)
    assert copy.returncode == 1, copy.stdout + copy.stderr  # its own reference: cents
    assert "0 reused" in copy.stdout and "1 agent run(s) executed" in copy.stdout
    assert results_names(copy) == [COPY]
    assert stored_runs(root) == {ORIGINAL: 1, COPY: 1}
    assert stored_grades(root) == {ORIGINAL: True, COPY: False}
    assert viewer_results(root) == sorted([COPY, ORIGINAL])


def test_the_two_run_together_keep_one_run_each_in_every_count(fresh_suite):
    root = fresh_suite
    both = run_cli("test", "--date", DAY, "-s", f"{COPY},{ORIGINAL}", cwd=root)
    no_traceback(both)
    assert both.returncode == 1, both.stdout + both.stderr
    assert "2 agent run(s) executed, 0 reused" in both.stdout
    assert results_names(both) == sorted([COPY, ORIGINAL])
    assert stored_runs(root) == {ORIGINAL: 1, COPY: 1}
    assert stored_grades(root) == {ORIGINAL: True, COPY: False}
    assert viewer_results(root) == sorted([COPY, ORIGINAL])

    again = run_cli("test", "--date", DAY, "-s", f"{ORIGINAL},{COPY}", cwd=root)
    assert "No agent run executed: all 2 runs reused" in again.stdout, again.stdout
    assert results_names(again) == sorted([COPY, ORIGINAL])

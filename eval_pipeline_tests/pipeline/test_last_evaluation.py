"""The inputs an unchanged rerun is compared on: new judge prompts or edited package code count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import eval_pipeline
from eval_pipeline.pipeline import EvaluationRequest, LastEvaluation
from eval_pipeline.pipeline import (
    _unchanged as unchanged,
)  # the unit itself: its judge prompts swapped
from eval_pipeline.store import StateFolder, ensure_schema_files, write_rows
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.tiny_suite import DAY, write_suite

MODEL = "replay:demo"


@pytest.fixture
def last(tmp_path: Path) -> LastEvaluation:
    """The record of a complete evaluation of one test, as it ended."""
    suite = load_suite(write_suite(tmp_path / "suite", cases={"q0": "Revenue?"}, dbt=False))
    layout = StateFolder.of(suite.config)
    ensure_schema_files(layout)
    grade = {"name": "q0", "status": "passed"}
    write_rows(layout, "grades", [grade], model=MODEL, run_date=DAY, materialization_id="m1")
    home = tmp_path / "home"
    home.mkdir()
    evaluation = LastEvaluation(suite, EvaluationRequest(models=(MODEL,), run_date=DAY), home)
    evaluation.capture()
    evaluation.save()
    return evaluation


def test_new_judge_prompts_are_other_inputs(last, monkeypatch: pytest.MonkeyPatch) -> None:
    assert last.reused() == 1
    monkeypatch.setattr(unchanged, "PROMPTS_VERSION", "another")
    assert last.reused() is None


def test_edited_package_code_is_other_inputs(
    last, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An editable install (or a reinstall of another commit) keeps its version number.
    package = tmp_path / "package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "grader.py").write_text("PASS = True\n")
    monkeypatch.setattr(eval_pipeline, "__file__", str(package / "__init__.py"))
    last.capture()
    last.save()
    assert last.reused() == 1
    stat = (package / "grader.py").stat()
    os.utime(package / "grader.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert last.reused() is None

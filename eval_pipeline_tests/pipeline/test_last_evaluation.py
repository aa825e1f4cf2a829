"""The inputs an unchanged rerun is compared on: new judge prompts or edited package code count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import eval_pipeline
from eval_pipeline.pipeline import EvaluationRequest
from eval_pipeline.pipeline import _unchanged as unchanged
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.tiny_suite import DAY, write_suite


@pytest.fixture
def inputs(tmp_path: Path):
    suite = load_suite(write_suite(tmp_path / "suite", cases={"q0": "Revenue?"}, dbt=False))
    request = EvaluationRequest(models=("replay:demo",), run_date=DAY)
    return lambda: unchanged._inputs(suite, request, tmp_path / "home")


def test_new_judge_prompts_are_other_inputs(inputs, monkeypatch: pytest.MonkeyPatch) -> None:
    before = inputs()
    assert inputs() == before
    monkeypatch.setattr(unchanged, "PROMPTS_VERSION", "another")
    assert inputs() != before


def test_edited_package_code_is_other_inputs(
    inputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An editable install (or a reinstall of another commit) keeps its version number.
    package = tmp_path / "package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "grader.py").write_text("PASS = True\n")
    monkeypatch.setattr(eval_pipeline, "__file__", str(package / "__init__.py"))
    before = inputs()
    stat = (package / "grader.py").stat()
    os.utime(package / "grader.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert inputs() != before

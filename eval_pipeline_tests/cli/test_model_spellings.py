"""A model as the user spelled it (nao's `openaiCompatible/vllm:qwen3` for our `vllm:qwen3`),
in every line `eval-pipeline test` shows and the results file, while the store keeps our ids."""

from __future__ import annotations

import io
import re
from datetime import date

import pytest

from eval_pipeline.cli import build_parser
from eval_pipeline.cli._render import (  # the unit itself: the report of a document built by hand
    print_report,
    report_console,
)
from eval_pipeline.cli._test_command import (  # the unit itself: the command's request, in-process
    _request,
)
from eval_pipeline.pipeline import RunChanges, build_results
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.cli.test_verbose_report import run_row
from eval_pipeline_tests.suite.nao_project import KEY_VARIABLE, write_nao_project

DAY = date(2026, 1, 5)


@pytest.fixture
def nao_suite(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "sk-test")
    return load_suite(write_nao_project(tmp_path / "shop"))


def test_a_model_given_in_naos_spelling_keeps_it_even_when_the_config_does_not_name_it(nao_suite):
    args = build_parser().parse_args(
        ["test", "--date", DAY.isoformat(), "-m", "openaiCompatible/vllm:llama", "-m", "vllm:qwen3"]
    )
    request = _request(nao_suite, args)
    assert request.models == ("vllm:llama", "vllm:qwen3")  # what the store keys runs by
    label = nao_suite.config.model_label
    assert request.model_label("vllm:llama", label) == "openaiCompatible/vllm:llama"
    # Given in our spelling: the config's (nao_config.yaml's test.models) names it.
    assert request.model_label("vllm:qwen3", label) == "openaiCompatible/vllm:qwen3"


def test_the_tables_grid_changes_and_summary_name_models_as_the_user_spelled_them():
    ours = ("scripted:scripted", "vllm:qwen3")
    spelled = {m: f"openaiCompatible/{m}" for m in ours}
    rows = [
        {**run_row("total_revenue", "passed"), "model": ours[0]},
        {**run_row("total_revenue", "failed"), "model": ours[1]},
    ]
    document = build_results(rows, list(ours), ["total_revenue"], DAY).labelled(spelled.get)
    console = report_console(io.StringIO())
    print_report(
        console,
        document,
        [spelled[m] for m in ours],
        changes={spelled[ours[1]]: RunChanges(regressed=["total_revenue"], improved=[])},
        label=spelled.get,
        executed=2,
        reused=0,
    )
    text = console.file.getvalue()
    assert text.count("openaiCompatible/scripted:scripted") >= 3  # results, models, grid
    assert "regressed since the previous run of openaiCompatible/vllm:qwen3" in text
    # Never our short id on its own.
    assert not re.search(r"(?<!/)(scripted:scripted|vllm:qwen3)", text), text

"""The progress lines of `eval-pipeline test` in a log: never folded, paths as typed."""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path

from eval_pipeline.agents import AgentRun
from eval_pipeline.cli._progress import Progress
from eval_pipeline.cli._render import plain_console


def test_a_stage_line_with_a_long_path_stays_on_one_line_relative_to_the_current_folder(
    monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    log = Path.cwd() / "tests_suite" / ".eval" / "logs" / "warehouse-build.log"
    out = io.StringIO()
    progress = Progress(plain_console(file=out, width=40), total=1)
    progress.stage(f"building the warehouse with dbt, first run only (log: {log})")
    assert out.getvalue() == (
        "→ building the warehouse with dbt, first run only "
        "(log: tests_suite/.eval/logs/warehouse-build.log)\n"
    )


def test_a_run_line_names_the_model_as_the_user_spelled_it():
    out = io.StringIO()
    progress = Progress(
        plain_console(file=out, width=200), total=1, label=lambda m: f"openaiCompatible/{m}"
    )
    progress.run_finished(AgentRun("total_revenue", "vllm:qwen3", 0, date(2026, 1, 5), "", ""))
    assert "total_revenue openaiCompatible/vllm:qwen3#0" in out.getvalue()

"""The progress lines of `eval-pipeline test` in a log: never folded, paths as typed."""

from __future__ import annotations

import io
from pathlib import Path

from eval_pipeline.cli._progress import Progress  # the unit itself: its lines at a given width
from eval_pipeline.cli._render import plain_console  # the unit itself: a console of that width


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

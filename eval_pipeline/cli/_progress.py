"""Progress of `eval-pipeline test`: a line per finished run; on a terminal, a live status line."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text

from eval_pipeline.agents import AgentRun, RunStatus
from eval_pipeline.cli._render import short_model, short_text, with_short_model
from eval_pipeline.grading import Grade, GradeStatus
from eval_pipeline.suite import printable


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.0f}s"
    return f"{int(value // 60)}m{int(value % 60):02d}s"


class Progress:
    """Counts runs as they finish and grades as they are decided; prints a line per run
    (unless quiet) and, on a terminal, keeps a live status line below them.

    Runs finish on the event loop of whichever pipeline step runs them; printing is guarded
    by a lock so lines never interleave.
    """

    def __init__(
        self,
        console: Console,
        total: int,
        *,
        quiet: bool = False,
        label: Callable[[str], str] = str,
    ) -> None:
        """`label`: a model as the user spelled it (the runs carry our ids)."""
        self.console = console
        self.label = label
        self.total = total
        self.quiet = quiet
        self.done = self.errors = self.passed = self.failed = 0
        self.cost = 0.0
        self.runs_started: float | None = None  # ETA counts from the first run, not the setup
        self._lock = threading.Lock()
        self._live = console.is_terminal
        self._status = console.status("") if self._live and not quiet else None

    def __enter__(self) -> Progress:
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._status is not None:
            self._status.stop()

    def stage(self, text: str) -> None:
        if text.startswith("evaluating") and self.runs_started is None:
            self.runs_started = time.monotonic()
        if not self.quiet:
            # Paths below the current folder read as the user typed them; soft_wrap: a path
            # (the warehouse build's log) is never folded onto a second line.
            here = f"{Path.cwd()}{os.sep}"
            line = Text(f"→ {printable(text.replace(here, ''))}", style="dim")
            self.console.print(line, soft_wrap=True, highlight=False)
        self._refresh()

    def status_line(self) -> str:
        elapsed = time.monotonic() - (self.runs_started or time.monotonic())
        eta = ""
        if 0 < self.done < self.total:
            eta = f", ETA {_seconds(elapsed / self.done * (self.total - self.done))}"
        return (
            f"{self.done}/{self.total} runs, {self.passed} passed, {self.failed} failed, "
            f"{self.errors} error(s), {_seconds(elapsed)}{eta}, ${self.cost:.4f} so far"
        )

    def _refresh(self) -> None:
        if self._status is not None:
            self._status.update(self.status_line())

    def __call__(self, item: object) -> None:
        if isinstance(item, AgentRun):
            self.run_finished(item)
        elif isinstance(item, Grade):
            with self._lock:
                self.passed += item.status is GradeStatus.PASSED
                self.failed += item.status is GradeStatus.FAILED
                self._refresh()

    def run_finished(self, run: AgentRun) -> None:
        with self._lock:
            self.done += 1
            self.errors += run.status is RunStatus.ERROR
            self.cost += run.cost_usd or 0.0
            self._refresh()
            if self.quiet:
                return
            self.console.print(self.run_line(run), highlight=False, soft_wrap=not self._live)

    def run_line(self, run: AgentRun) -> Text:
        """One line per finished run. On a terminal it is cut to the width (the status line
        below counts the rest); in a log (CI, a pipe) it is short and never folded, so a
        line of the log is a run."""
        error = run.status is RunStatus.ERROR
        cause = with_short_model(run.error, run.model) if run.error else ""
        model = short_model(self.label(run.model))
        if not self._live:
            return Text(
                f"[{self.done}/{self.total}] {'error' if error else 'ran'} {printable(run.case_name)} "
                f"{model}#{run.attempt} {run.duration_ms / 1000:.1f}s"
                + (f": {short_text(cause, 80)}" if cause else "")
            )
        return Text.assemble(
            f"  [{self.done}/{self.total}] ",
            ("error", "red") if error else ("ran  ", "green"),
            f" {printable(run.case_name)} ",
            (f"{model} #{run.attempt}", "dim"),
            f" {run.duration_ms / 1000:.1f}s {run.usage.total_tokens:,} tok",
            f" — {short_text(cause, 100)}" if cause else "",
            no_wrap=True,
            overflow="ellipsis",
        )

"""What `eval-pipeline test` shows a person: live progress while runs execute, then the tables.

Agent, test and data text reaches rich only as `Text`, never as a markup string: a reply
holding `[/x]` would raise MarkupError, and `:a:` would turn into an emoji.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from eval_pipeline.agents import AgentRun, RunStatus
from eval_pipeline.grading import Grade, GradeStatus
from eval_pipeline.pipeline import detectable_difference

# Messages are cut (a reply can be long) but wrap in their column rather than hide the cause.
MESSAGE_WIDTH = 120
MESSAGE_WIDTH_PLAIN = 160  # a pipe or a file: 200 columns
MODEL_WIDTH = 44


def plain_console(**options: Any) -> Console:
    """A console that never turns `:name:` into an emoji (our text has no emoji codes)."""
    return Console(emoji=False, **options)


def short_model(model: str, width: int = MODEL_WIDTH) -> str:
    """A model id that fits a table column: the provider and the end of the id, which is what
    tells models apart (an OpenAI-compatible server may name its model by a long file path)."""
    if len(model) <= width:
        return model
    provider, colon, rest = model.partition(":")
    tail = rest.rsplit("/", 1)[-1]
    candidate = f"{provider}{colon}…/{tail}" if "/" in rest else ""
    if candidate and len(candidate) <= width:
        return candidate
    keep = width - 1
    return model[: keep // 3] + "…" + model[-(keep - keep // 3) :]


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

    def __init__(self, console: Console, total: int, *, quiet: bool = False) -> None:
        self.console = console
        self.total = total
        self.quiet = quiet
        self.done = self.errors = self.passed = self.failed = 0
        self.cost = 0.0
        self.runs_started: float | None = None  # ETA counts from the first run, not the setup
        self._lock = threading.Lock()
        self._status = console.status("") if console.is_terminal and not quiet else None

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
            self.console.print(Text(f"→ {text}", style="dim"))
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
            error = run.status is RunStatus.ERROR
            line = Text.assemble(
                f"  [{self.done}/{self.total}] ",
                ("error", "red") if error else ("ran  ", "green"),
                f" {run.case_name} ",
                (f"{short_model(run.model)} #{run.attempt}", "dim"),
                f" {run.duration_ms / 1000:.1f}s {run.usage.total_tokens:,} tok",
                f" — {_short(_with_short_model(run.error, run.model), 100)}" if run.error else "",
            )
            self.console.print(line, highlight=False)


def report_console(file=None) -> Console:
    """A console for the tables: the terminal's width on a terminal; elsewhere (a pipe, a CI
    log, a file) plain text, wide enough that rows do not wrap."""
    console = plain_console(file=file)
    if file is not None or not console.is_terminal:
        console = plain_console(file=file, width=200, no_color=True, highlight=False)
    return console


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)


def _status_text(status: str) -> Text:
    style = {"passed": "green", "failed": "red", "error": "yellow"}.get(status, "")
    label = {"passed": "✓ pass", "failed": "✗ fail", "error": "! error"}.get(status, status)
    return Text(label, style=style)


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _short(text: str | None, width: int = MESSAGE_WIDTH) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _with_short_model(message: str | None, model: str) -> str:
    # Messages start with the endpoint ("<model id>: could not connect…"): a long id would
    # fill the cut message and hide the cause.
    return (
        (message or "").replace(model, short_model(model))
        if len(model) > MODEL_WIDTH
        else message or ""
    )


def results_table(
    results: Sequence[dict[str, Any]], *, show_attempts: bool, table_width: int | None = None
) -> Table:
    table = _table("Results")
    for column in (
        "Test",
        "Model",
        *(["#"] if show_attempts else []),
        "Status",
        "Message",
        "Tokens",
        "Cost",
        "Time (s)",
        "Tools",
    ):
        table.add_column(
            column,
            justify="right" if column in ("Tokens", "Cost", "Time (s)", "Tools", "#") else "left",
            # A narrow table wraps the message rather than cutting it.
            overflow="fold" if column == "Message" else "ellipsis",
        )
    for r in results:
        message = _with_short_model(r["message"], r["model"])
        table.add_row(
            Text(r["name"]),
            Text(short_model(r["model"])),
            *([str(r["attempt"])] if show_attempts else []),
            _status_text(r["status"]),
            Text(_short(message, MESSAGE_WIDTH if table_width is None else MESSAGE_WIDTH_PLAIN)),
            f"{r['tokens']:,}",
            _money(r["cost_usd"]),
            f"{r['duration_ms'] / 1000:.1f}",
            str(r["tool_call_count"]),
        )
    return table


def models_table(by_model: Sequence[dict[str, Any]]) -> Table:
    table = _table("Performance by Model")
    for column in (
        "Model",
        "Pass Rate",
        "Passed",
        "Errors",
        "Tokens",
        "Cost",
        "Avg Time (s)",
        "p95 (s)",
        "Avg Tools",
    ):
        table.add_column(
            column,
            justify="left" if column == "Model" else "right",
            overflow="fold" if column == "Model" else "ellipsis",
        )
    for m in by_model:
        table.add_row(
            Text(m["model"]),
            _rate_with_interval(m),
            f"{m['passed']}/{m['total']}",
            str(m["errors"]),
            f"{m['total_tokens']:,}",
            _money(m["total_cost_usd"])
            # a partial sum: some runs have no price
            + ("+?" if m["total_cost_usd"] is not None and not m["cost_complete"] else ""),
            f"{m['avg_duration_ms'] / 1000:.1f}",
            f"{m['p95_duration_ms'] / 1000:.1f}",
            f"{m['avg_tool_calls']:.1f}",
        )
    return table


def _rate_with_interval(entry: dict[str, Any]) -> str:
    """`72.3% ± 13.1`: the larger distance to the 95% interval's ends (a Wilson interval is
    not symmetric around the rate, so ± reads as "within", never narrower than it is)."""
    interval = entry.get("pass_rate_ci95")
    if not interval:
        return f"{entry['pass_rate']:.1f}%"
    low, high = interval
    half = max(entry["pass_rate"] - low, high - entry["pass_rate"])
    return f"{entry['pass_rate']:.1f}% ± {half:.1f}"


def comparisons_table(comparisons: Sequence[dict[str, Any]]) -> Table:
    """ "Is the difference real?": each pair of models on their shared tests."""
    table = _table("Is the difference real?")
    for column in (
        "Model A",
        "Model B",
        "Tests",
        "A only",
        "B only",
        "p",
        "p (Holm)",
        "Significant",
    ):
        table.add_column(column, justify="left" if column.startswith("Model") else "right")
    for c in comparisons:
        table.add_row(
            Text(short_model(c["model_a"])),
            Text(short_model(c["model_b"])),
            str(c["tests"]),
            str(c["a_only"]),
            str(c["b_only"]),
            f"{c['p_value']:.3f}",
            f"{c['p_adjusted']:.3f}",
            "yes" if c["significant"] else "no",
        )
    return table


def grid_table(results: Sequence[dict[str, Any]], models: Sequence[str]) -> Table:
    table = _table("Pass / Fail by Test and Model")
    table.add_column("Test")
    for model in models:
        table.add_column(Text(short_model(model)), justify="center")
    cells: dict[tuple[str, str], list[str]] = {}
    order: list[str] = []
    for r in results:
        if r["name"] not in order:
            order.append(r["name"])
        cells.setdefault((r["name"], r["model"]), []).append(r["status"])
    for name in order:
        row = []
        for model in models:
            statuses = cells.get((name, model), [])
            if not statuses:
                row.append(Text(""))
            elif all(s == "passed" for s in statuses):
                row.append(Text("✓", style="green"))
            elif len(statuses) > 1:
                passes = sum(s == "passed" for s in statuses)
                row.append(Text(f"{passes}/{len(statuses)}", style="yellow" if passes else "red"))
            else:
                row.append(
                    Text(
                        "!" if statuses[0] == "error" else "✗",
                        style="yellow" if statuses[0] == "error" else "red",
                    )
                )
        table.add_row(Text(name), *row)
    return table


def pass_at_k_table(metrics: Sequence[dict[str, Any]]) -> Table:
    table = _table("pass@k by Test and Model")
    for column in ("Test", "Model", "Passes", "pass@1", "pass@k", "pass^k", "Flaky"):
        table.add_column(column, justify="left" if column in ("Test", "Model") else "right")
    for m in metrics:
        table.add_row(
            Text(m["name"]),
            Text(short_model(m["model"])),
            f"{m['passes']}/{m['attempts']}",
            f"{m['pass_at_1']:.2f}",
            f"{m['pass_at_k']:.2f}",
            "✓" if m["pass_hat_k"] else "✗",
            "yes" if m["flaky"] else "",
        )
    return table


def judge_noise_table(entries: Sequence[dict[str, Any]]) -> Table:
    """`--rejudge-samples`: per test, the judge's self-agreement beside the agent's pass@1."""
    table = _table("Where the noise comes from (judge re-judged the same transcripts)")
    columns = ("Test", "Model", "Judge agreement", "Samples", "Agent pass@1", "")
    for column in columns:
        table.add_column(column, justify="left" if column in ("Test", "Model", "") else "right")
    for e in entries:
        table.add_row(
            Text(e["name"]),
            Text(short_model(e["model"])),
            f"{e['judge_self_agreement']:.0%}",
            f"{e['samples']} × {e['judged_runs']} run(s)",
            f"{e['agent_pass_at_1']:.2f}",
            Text("flips on the judge alone", style="yellow") if e["flips_on_judge"] else "",
        )
    return table


def cost_text(summary: dict[str, Any]) -> str:
    """The cost as known: a model with no price (self-hosted) is unknown, never $0."""
    cost = summary.get("total_cost_usd")
    if cost is None:
        return "cost unknown"
    if not summary.get("cost_complete", True):
        return f"${cost:.4f} + unknown (some runs have no price)"
    return f"${cost:.4f}"


def pass_hat_k_text(document: dict[str, Any]) -> str:
    """`, pass^k 0.75 (k=3)` when tests ran more than once: the share of (test, model)
    pairs that passed every attempt."""
    metrics = document.get("pass_metrics") or {}
    if metrics.get("k", 0) <= 1:
        return ""
    return f", pass^k {metrics['aggregate']['pass_hat_k']:.2f} (k={metrics['k']})"


def changes_lines(changes: dict[str, tuple[list[str], list[str], list[str]]]) -> list[Text]:
    """'regressed / improved since the previous run' lines per model, and the tests whose
    status changed with a new judge (not the model: neither regressed nor improved)."""
    lines = []
    for model, (regressed, improved, rejudged) in changes.items():
        for label, style, names in (
            (f"regressed since the previous run of {model}:", "red", regressed),
            (f"improved since the previous run of {model}:", "green", improved),
            (f"changed with a new judge, not by {model}:", "yellow", rejudged),
        ):
            if names:
                lines.append(Text.assemble((label, style), f" {', '.join(names)}"))
    return lines


def print_report(
    console: Console,
    document: dict[str, Any],
    models: Sequence[str],
    *,
    changes: dict[str, tuple[list[str], list[str], list[str]]],
    executed: int,
    reused: int,
) -> None:
    results = document["results"]
    several_attempts = any(m["attempts"] > 1 for m in document["pass_metrics_by_test"])
    wide = None if console.is_terminal else console.width
    console.print(results_table(results, show_attempts=several_attempts, table_width=wide))
    console.print(models_table(document["by_model"]))
    comparisons = document.get("comparisons") or []
    if comparisons:
        console.print(comparisons_table(comparisons))
        sentence = detectable_difference(comparisons) or ""
        console.print(sentence[:1].upper() + sentence[1:] + ".\n", highlight=False)
    if len(models) > 1:
        console.print(grid_table(results, models))
    if several_attempts:
        repeated = [m for m in document["pass_metrics_by_test"] if m["attempts"] > 1]
        console.print(pass_at_k_table(repeated))
    if document.get("judge_noise"):
        console.print(judge_noise_table(document["judge_noise"]))
    for line in changes_lines(changes):
        console.print(line)
    summary = document["summary"]
    console.print(
        f"[bold]{summary['passed']}/{summary['total']} passed[/bold] ({summary['pass_rate']:.1f}%), "
        f"{summary['total'] - summary['passed'] - summary['errors']} failed, {summary['errors']} error(s), "
        f"{summary['total_tokens']:,} tokens, {cost_text(summary)}{pass_hat_k_text(document)}",
        highlight=False,
    )
    if executed == 0 and reused:
        console.print(
            f"No agent run executed: all {reused} runs reused (nothing changed).", highlight=False
        )
    else:
        console.print(f"{executed} agent run(s) executed, {reused} reused.", highlight=False)

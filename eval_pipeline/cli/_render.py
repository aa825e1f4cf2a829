"""What `eval-pipeline test` shows a person once runs are graded: the tables and the summary.

Agent, test and data text reaches rich only as `Text`, never as a markup string: a reply
holding `[/x]` would raise MarkupError, and `:a:` would turn into an emoji. And only through
`printable` (`shown_text`, `short_text`, `short_model`): rich passes ESC through, so a test name
holding `ESC ]52;…` would write the terminal's clipboard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from eval_pipeline.grading import CaseMetrics, JudgeNoise
from eval_pipeline.pipeline import (
    CAUSES,
    BudgetOutcome,
    ModelComparison,
    ModelEntry,
    ResultEntry,
    ResultsDocument,
    RunChanges,
    Summary,
)
from eval_pipeline.suite import printable, truncate

# Messages are cut to one line (a reply can be long): to the room the terminal leaves, and
# at most this much, so the table stays readable.
MESSAGE_WIDTH = 120
MESSAGE_WIDTH_PLAIN = 160  # a pipe or a file: 200 columns
MODEL_WIDTH = 44
#: Above this many runs the pretty report lists only the runs that did not pass, unless
#: `--all-runs`: a table of thousands of passing lines buries the failures a reader looks for
#: (and rendering it took seconds at 1,500 runs). The summary still counts every run.
FULL_REPORT_MAX_RUNS = 200


def plain_console(**options: Any) -> Console:
    """A console that never turns `:name:` into an emoji (our text has no emoji codes)."""
    return Console(emoji=False, **options)


def shown_text(text: str, style: str = "") -> Text:
    """Text from an agent, a test or a results file, as rich prints it: never markup, every
    control character as its escape."""
    return Text(printable(text), style=style)


def short_model(model: str, width: int = MODEL_WIDTH) -> str:
    """A model id that fits a table column: the provider and the end of the id, which is what
    tells models apart (an OpenAI-compatible server may name its model by a long file path).
    Printable: its control characters as escapes."""
    model = printable(model)
    if len(model) <= width:
        return model
    provider, colon, rest = model.partition(":")
    tail = rest.rsplit("/", 1)[-1]
    candidate = f"{provider}{colon}…/{tail}" if "/" in rest else ""
    if candidate and len(candidate) <= width:
        return candidate
    keep = width - 1
    return model[: keep // 3] + "…" + model[-(keep - keep // 3) :]


def report_console(file=None) -> Console:
    """A console for the tables: the terminal's width on a terminal; elsewhere (a pipe, a CI
    log, a file) plain text, wide enough that rows do not wrap."""
    console = plain_console(file=file)
    if file is not None or not console.is_terminal:
        console = plain_console(file=file, width=200, no_color=True, highlight=False)
    return console


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)


def status_text(status: str) -> Text:
    style = {"passed": "green", "failed": "red", "error": "yellow"}.get(status, "")
    label = {"passed": "✓ pass", "failed": "✗ fail", "error": "! error"}.get(status, status)
    return Text(label, style=style)


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def short_text(text: str | None, width: int = MESSAGE_WIDTH) -> str:
    """A message on one line of at most `width` characters, its control characters as escapes."""
    return truncate(printable((text or "").replace("\n", " ")), width)


def with_short_model(message: str | None, model: str) -> str:
    # Messages start with the endpoint ("<model id>: could not connect…"): a long id would
    # fill the cut message and hide the cause.
    return (
        (message or "").replace(model, short_model(model))
        if len(model) > MODEL_WIDTH
        else message or ""
    )


# On a narrow terminal the table gives up these columns, in this order, before the message
# gets narrower than MESSAGE_MIN_WIDTH (the model table below totals the numbers; one model
# is named there too); then the model ids are cut, down to MODEL_MIN_WIDTH. Test names stay.
DROPPABLE = ("Tools", "Time (s)", "Cost", "Tokens", "Model")
MESSAGE_MIN_WIDTH = 40
MODEL_MIN_WIDTH = 12
NUMERIC = ("Tokens", "Cost", "Time (s)", "Tools", "#")


def _results_rows(results: Sequence[ResultEntry], model_width: int) -> list[dict[str, Any]]:
    return [
        {
            "Test": shown_text(r.name),
            "Model": Text(short_model(r.model, model_width)),
            "#": str(r.attempt),
            "Status": status_text(r.status),
            "Message": with_short_model(r.message, r.model),
            "Tokens": f"{r.tokens:,}",
            "Cost": _money(r.cost_usd),
            "Time (s)": f"{r.duration_ms / 1000:.1f}",
            "Tools": str(r.tool_call_count),
        }
        for r in results
    ]


def _build_results_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], message_width: int
) -> Table:
    table = _table("Results")
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in NUMERIC else "left",
            # Every column keeps its width; only the message is cut to the room left.
            no_wrap=True,
            width=message_width if column == "Message" else None,
        )
    for row in rows:
        cells = [row[c] for c in columns]
        if "Message" in columns:
            at = columns.index("Message")
            cells[at] = Text(short_text(cells[at], message_width))
        table.add_row(*cells)
    return table


def results_table(
    results: Sequence[ResultEntry],
    *,
    show_attempts: bool,
    width: int,
    message_limit: int = MESSAGE_WIDTH,
) -> Table:
    """The runs, one line each, fitted to `width` columns: test names stay whole; the message
    is cut to the room left (at most `message_limit`); on a narrow terminal the per-run
    numbers (and the model, when there is one) go, then model ids are cut, before the
    message gets narrower than MESSAGE_MIN_WIDTH."""
    columns = [
        "Test",
        "Model",
        *(["#"] if show_attempts else []),
        "Status",
        "Message",
        "Tokens",
        "Cost",
        "Time (s)",
        "Tools",
    ]
    several_models = len({r.model for r in results}) > 1
    droppable = [c for c in DROPPABLE if c != "Model" or not several_models]
    model_width = MODEL_WIDTH
    rows = _results_rows(results, model_width)
    console = plain_console(width=10_000)  # only measures: natural widths, nothing printed

    def room_for_message() -> int:
        without = console.measure(_build_results_table(rows, columns, 1)).maximum
        return width - (without - 1)

    room = room_for_message()
    while room < MESSAGE_MIN_WIDTH and droppable:
        columns.remove(droppable.pop(0))
        room = room_for_message()
    if room < MESSAGE_MIN_WIDTH and "Model" in columns:
        longest_model = max(len(short_model(r.model)) for r in results)
        model_width = max(MODEL_MIN_WIDTH, longest_model - (MESSAGE_MIN_WIDTH - room))
        rows = _results_rows(results, model_width)
        room = room_for_message()
    longest = max((len(short_text(r["Message"], message_limit)) for r in rows), default=1)
    message_width = max(min(room, message_limit, max(longest, len("Message"))), 12)
    return _build_results_table(rows, columns, message_width)


def models_table(by_model: Sequence[ModelEntry]) -> Table:
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
            shown_text(m.model),
            _rate_with_interval(m),
            f"{m.passed}/{m.total}",
            str(m.errors),
            f"{m.total_tokens:,}",
            _money(m.total_cost_usd)
            # a partial sum: some runs have no price
            + ("+?" if m.total_cost_usd is not None and not m.cost_complete else ""),
            f"{m.avg_duration_ms / 1000:.1f}",
            f"{m.p95_duration_ms / 1000:.1f}",
            f"{m.avg_tool_calls:.1f}",
        )
    return table


def _rate_with_interval(entry: ModelEntry) -> str:
    """`72.3% ± 13.1`: the larger distance to the 95% interval's ends (a Wilson interval is
    not symmetric around the rate, so ± reads as "within", never narrower than it is)."""
    low, high = entry.pass_rate_ci95
    half = max(entry.pass_rate - low, high - entry.pass_rate)
    return f"{entry.pass_rate:.1f}% ± {half:.1f}"


def comparisons_table(
    comparisons: Sequence[ModelComparison], label: Callable[[str], str] = str
) -> Table:
    """ "Is the difference real?": each pair of models on their shared tests, named by
    `label` (the document's comparisons keep our ids)."""
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
            Text(short_model(label(c.model_a))),
            Text(short_model(label(c.model_b))),
            str(c.tests),
            str(c.a_only),
            str(c.b_only),
            f"{c.p_value:.3f}",
            f"{c.p_adjusted:.3f}",
            "yes" if c.significant else "no",
        )
    return table


def grid_table(results: Sequence[ResultEntry], models: Sequence[str]) -> Table:
    table = _table("Pass / Fail by Test and Model")
    table.add_column("Test")
    for model in models:
        table.add_column(Text(short_model(model)), justify="center")
    cells: dict[tuple[str, str], list[str]] = {}
    order: list[str] = []
    for r in results:
        if r.name not in order:
            order.append(r.name)
        cells.setdefault((r.name, r.model), []).append(r.status)
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
        table.add_row(shown_text(name), *row)
    return table


def pass_at_k_table(metrics: Sequence[CaseMetrics]) -> Table:
    table = _table("pass@k by Test and Model")
    for column in ("Test", "Model", "Passes", "pass@1", "pass@k", "pass^k", "Flaky"):
        table.add_column(column, justify="left" if column in ("Test", "Model") else "right")
    for m in metrics:
        table.add_row(
            shown_text(m.name),
            Text(short_model(m.model)),
            f"{m.passes}/{m.attempts}",
            f"{m.pass_at_1:.2f}",
            f"{m.pass_at_k:.2f}",
            "✓" if m.pass_hat_k else "✗",
            "yes" if m.flaky else "",
        )
    return table


def judge_noise_table(entries: Sequence[JudgeNoise], label: Callable[[str], str] = str) -> Table:
    """`--rejudge-samples`: per test, the judge's self-agreement beside the agent's pass@1."""
    table = _table("Where the noise comes from (judge re-judged the same transcripts)")
    columns = ("Test", "Model", "Judge agreement", "Samples", "Agent pass@1", "")
    for column in columns:
        table.add_column(column, justify="left" if column in ("Test", "Model", "") else "right")
    for e in entries:
        table.add_row(
            shown_text(e.name),
            Text(short_model(label(e.model))),
            f"{e.judge_self_agreement:.0%}",
            f"{e.samples} × {e.judged_runs} run(s)",
            f"{e.agent_pass_at_1:.2f}",
            Text("flips on the judge alone", style="yellow") if e.flips_on_judge else "",
        )
    return table


def cost_text(summary: Summary) -> str:
    """The cost as known: a model with no price (self-hosted) is unknown, never $0."""
    cost = summary.total_cost_usd
    if cost is None:
        return "cost unknown"
    if not summary.cost_complete:
        return f"${cost:.4f} + unknown (some runs have no price)"
    return f"${cost:.4f}"


def errors_text(document: ResultsDocument) -> str:
    """`1 error(s)`, with what the gate made of them: `incomplete, exit 3` unless errors
    are allowed, when they count as not passed (the results file's `threshold` says so)."""
    errors = document.summary.errors
    gate = document.threshold
    if not errors or gate is None:
        return f"{errors} error(s)"
    if gate.allow_errors:
        return f"{errors} error(s) counted as not passed (errors allowed)"
    return f"{errors} error(s), so the evaluation is incomplete (exit 3)"


def pass_hat_k_text(document: ResultsDocument) -> str:
    """`, pass^k 0.75 (k=3)` when tests ran more than once: the share of (test, model)
    pairs that passed every attempt."""
    metrics = document.pass_metrics
    if metrics.k <= 1:
        return ""
    return f", pass^k {metrics.aggregate.pass_hat_k:.2f} (k={metrics.k})"


def changes_lines(changes: dict[str, RunChanges]) -> list[Text]:
    """'regressed / improved since the previous run' lines per model, each test with what
    changed besides the answer ("total_revenue (reference SQL changed)"), and the tests whose
    status changed with a new judge or against runs graded by other rules (imported from
    nao): not the model, so neither regressed nor improved."""
    lines = []
    for model, change in changes.items():
        for label, style, names in (
            (
                f"regressed since the previous run of {model}:",
                "red",
                [change.label(n) for n in change.regressed],
            ),
            (
                f"improved since the previous run of {model}:",
                "green",
                [change.label(n) for n in change.improved],
            ),
            (f"changed with a new judge, not by {model}:", "yellow", change.rejudged),
            *(
                (
                    f"changed by grading rules (imported from {grader}), not by {model}:",
                    "yellow",
                    entries,
                )
                for grader, entries in change.by_rules.items()
            ),
        ):
            if names:
                lines.append(
                    Text.assemble((printable(label), style), shown_text(f" {', '.join(names)}"))
                )
    return lines


def nao_disagreement_lines(results: Sequence[ResultEntry]) -> list[Text]:
    """A line per run of nao's agent where nao's own verdict differs from ours:
    "total_revenue [nao:openai:gpt-4.1]: ours passed, nao's failed (row count: 1 vs 2)"."""
    lines = []
    for r in results:
        nao = r.details.nao_verdict
        # A verdict nao's comparison could not give disagrees with nothing.
        if not nao or nao.get("passed") is None or bool(nao.get("passed")) == r.passed:
            continue
        theirs = "passed" if nao.get("passed") else "failed"
        why = f" ({nao['message']})" if nao.get("message") else ""
        lines.append(
            Text.assemble(
                shown_text(f"{r.name} [{r.model}]: "),
                (f"ours {'passed' if r.passed else r.status}, nao's {theirs}", "yellow"),
                shown_text(why),
            )
        )
    return lines


def reuse_line(executed: int, reused: int, changes: dict[str, RunChanges]) -> str:
    """How many runs were made and reused; when none was made, what changed the verdicts
    (a reused run is the same answer: only the grading inputs can have changed)."""
    if executed or not reused:
        return f"{executed} agent run(s) executed, {reused} reused."
    causes = sorted(
        {c for change in changes.values() for found in change.causes.values() for c in found},
        key=CAUSES.index,
    )
    rejudged = any(change.rejudged for change in changes.values())
    ruled = any(change.by_rules for change in changes.values())
    if causes or rejudged or ruled:
        what = ", ".join(
            [*causes, *(["judge"] if rejudged else []), *(["grading rules"] if ruled else [])]
        )
        return f"No agent run executed: all {reused} runs reused; verdicts changed by: {what}."
    moved = any(change.regressed or change.improved for change in changes.values())
    tail = "" if moved else "; no verdict changed since the previous run"
    return f"No agent run executed: all {reused} runs reused{tail}."


def cause_lines(reruns: Mapping[str, int], regraded: Mapping[str, Sequence[int]]) -> list[str]:
    """One line per cause of what was made or graded again (`EvaluationResult.reruns`,
    `.regraded`), the most runs first: "re-run: context changed (RULES.md) — 12 run(s)",
    "regraded: grading rules changed (tolerance) — 12 run(s), no verdict moved"."""
    lines = [
        f"re-run: {cause} — {runs} run(s)"
        for cause, runs in sorted(reruns.items(), key=lambda item: (-item[1], item[0]))
    ]
    for cause, (runs, moved) in sorted(regraded.items(), key=lambda item: (-item[1][0], item[0])):
        verdicts = {0: "no verdict moved", 1: "1 verdict moved"}.get(
            moved, f"{moved} verdicts moved"
        )
        lines.append(f"regraded: {cause} — {runs} run(s), {verdicts}")
    return [printable(line) for line in lines]


def print_budget(console: Console, budget: BudgetOutcome) -> None:
    """Where an attempt budget went (the tests given more than one attempt, and why) and what
    it decided."""
    extra = [entry for entry in budget.attempts if entry[2] > 1]
    if extra:
        table = _table("Attempt budget: tests given more attempts")
        for column in ("Model", "Test", "Attempts", "Why"):
            table.add_column(column, justify="right" if column == "Attempts" else "left")
        for model, test, attempts, reason in extra:
            table.add_row(
                shown_text(model), shown_text(test), str(attempts), shown_text(reason or "")
            )
        console.print(table)
    spent = (
        f"{budget.spent_runs} of {budget.budget.runs} runs"
        if budget.budget.runs
        else (f"{budget.spent_runs} runs")
    )
    if budget.budget.usd is not None and budget.spent_usd is not None:
        spent += f", ${budget.spent_usd:.4f} of ${budget.budget.usd:g}"
    console.print(
        f"Attempt budget: {spent} in {budget.rounds} round(s), question: {budget.question.kind}",
        highlight=False,
        markup=False,
    )
    for sentence in budget.sentences():
        console.print(shown_text(sentence), highlight=False)


def print_report(
    console: Console,
    document: ResultsDocument,
    models: Sequence[str],
    *,
    changes: dict[str, RunChanges],
    executed: int,
    reused: int,
    reruns: Mapping[str, int] | None = None,
    regraded: Mapping[str, Sequence[int]] | None = None,
    failures_only: bool = False,
    all_runs: bool = False,
    judge_noise: bool = False,
    label: Callable[[str], str] = str,
) -> None:
    """The tables and the summary of an evaluation. Pass the labelled document (the models
    as the user spelled them), `models` and `changes` in the same spelling, and the `label`
    of our ids for the comparisons and the judge's noise, which keep them.
    `failures_only`: the per-run, grid and pass@k tables leave out what passed (the summary
    and the model table still count it); so do they past `FULL_REPORT_MAX_RUNS` runs, unless
    `all_runs`. `judge_noise`: the judge's self-agreement table, when this command re-judged
    (a stored grade keeps its samples, so the results file has them either way)."""
    results = document.results
    several_attempts = any(m.attempts > 1 for m in document.pass_metrics_by_test)
    summarised = not failures_only and not all_runs and len(results) > FULL_REPORT_MAX_RUNS
    hidden_reason = (
        f"more than {FULL_REPORT_MAX_RUNS} runs; --all-runs lists them"
        if summarised
        else "--failures-only"
    )
    failures_only = failures_only or summarised
    shown = [r for r in results if r.status != "passed"] if failures_only else list(results)
    console.print(
        results_table(
            shown,
            show_attempts=several_attempts,
            width=console.width,
            message_limit=MESSAGE_WIDTH if console.is_terminal else MESSAGE_WIDTH_PLAIN,
        )
    )
    if failures_only:
        console.print(
            f"{len(results) - len(shown)} passing run(s) not shown ({hidden_reason})",
            highlight=False,
        )
    console.print(models_table(document.by_model))
    if document.comparisons:
        console.print(comparisons_table(document.comparisons, label))
        sentence = document.detectable_difference() or ""
        console.print(shown_text(sentence[:1].upper() + sentence[1:] + ".\n"), highlight=False)
    if len(models) > 1:
        failing = {r.name for r in shown}
        console.print(grid_table([r for r in results if r.name in failing], models))
    if several_attempts:
        repeated = [
            m
            for m in document.pass_metrics_by_test
            if m.attempts > 1 and not (failures_only and m.pass_hat_k)
        ]
        console.print(pass_at_k_table(repeated))
    if judge_noise and document.judge_noise:
        console.print(judge_noise_table(document.judge_noise, label))
    for line in [*changes_lines(changes), *nao_disagreement_lines(results)]:
        console.print(line)
    if document.budget is not None:
        print_budget(console, document.budget)
    summary = document.summary
    console.print(
        f"[bold]{summary.passed}/{summary.total} passed[/bold] ({summary.pass_rate:.1f}%), "
        f"{summary.total - summary.passed - summary.errors} failed, {errors_text(document)}, "
        f"{summary.total_tokens:,} tokens, {cost_text(summary)}{pass_hat_k_text(document)}",
        highlight=False,
    )
    console.print(reuse_line(executed, reused, changes), highlight=False)
    for line in cause_lines(reruns or {}, regraded or {}):
        console.print(line, highlight=False, markup=False, soft_wrap=True)

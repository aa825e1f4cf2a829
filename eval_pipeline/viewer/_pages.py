"""The day's pages: overview (cards, performance by model, the test × model grid) and the runs table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from eval_pipeline.pipeline import BudgetOutcome, ModelEntry, ResultEntry, ResultsDocument
from eval_pipeline.viewer._charts import ModelLook, dot
from eval_pipeline.viewer._data import result_run_id
from eval_pipeline.viewer._html import (
    STATUS_ICONS,
    Child,
    Markup,
    badge,
    card,
    cell,
    el,
    fmt_cost,
    fmt_int,
    fmt_ms,
    join,
    section,
    table,
    url,
)


@dataclass
class Links:
    """Where links go: to the server's pages, or (in an export) to anchors on the one page."""

    live: bool = True
    anchors: set[str] = field(default_factory=set)

    def run(self, run_id: str) -> str | None:
        if self.live:
            return f"/run/{run_id}"
        return f"#run-{run_id}" if run_id in self.anchors else None

    def page(self, path: str, **params: Any) -> str | None:
        return url(path, **params) if self.live else None


def link(href: str | None, *children: Child, **attrs: Any) -> Markup:
    return el("a", *children, href=href, **attrs) if href else el("span", *children, **attrs)


def page_head(title: str, sub: Child = None, actions: Child = None, crumbs: Child = None) -> Markup:
    return el(
        "div",
        el(
            "div",
            el("div", crumbs, class_="crumbs") if crumbs else None,
            el("h1", title),
            el("div", sub, class_="sub") if sub else None,
        ),
        el("div", actions, class_="actions") if actions else None,
        class_="page-head",
    )


def day_picker(day: date, days: list[date], **keep: Any) -> Markup:
    """A select of the days that have results, with the previous / next day as arrows."""
    index = days.index(day) if day in days else -1
    older = days[index + 1] if 0 <= index < len(days) - 1 else None
    newer = days[index - 1] if index > 0 else None
    hidden = [el("input", type="hidden", name=k, value=v) for k, v in keep.items() if v]
    options = [
        el("option", d.isoformat(), value=d.isoformat(), selected=d == day) for d in days
    ] or [el("option", day.isoformat(), value=day.isoformat(), selected=True)]
    return join(
        link(
            url("/", date=older.isoformat(), **keep) if older else None,
            "←",
            class_="button secondary",
            title="previous day",
        ),
        el(
            "form",
            hidden,
            el("select", options, name="date", aria_label="day"),
            el("noscript", el("button", "Go", type="submit")),
            method="get",
            action="/",
            class_="autosubmit",
        ),
        link(
            url("/", date=newer.isoformat(), **keep) if newer else None,
            "→",
            class_="button secondary",
            title="next day",
        ),
    )


def empty_state(title: str, text: Child) -> Markup:
    return el("div", el("h2", title), el("p", text), class_="empty-state panel")


# ---- overview -------------------------------------------------------------------------------


def summary_cards(document: ResultsDocument, previous: tuple[date, float] | None) -> Markup:
    summary = document.summary
    total = summary.total
    rate = summary.pass_rate
    delta = None
    if previous is not None and previous[1] is not None and total:
        points = round(100 * summary.passed / total - 100 * previous[1], 1)
        arrow = "▲" if points > 0 else "▼" if points < 0 else "="
        delta = el(
            "span",
            f"{arrow} {abs(points):.1f} pts vs {previous[0].isoformat()}",
            class_="delta-up" if points > 0 else "delta-down" if points < 0 else None,
        )
    wrong = summary.failed - summary.errors
    cost = summary.total_cost_usd
    return el(
        "div",
        card(
            "Pass rate",
            f"{rate:.1f}%",
            delta or f"{summary.passed} of {total} runs",
            tone="pass" if rate >= 80 else "fail" if rate < 50 else None,
        ),
        card("Runs", fmt_int(total), f"{summary.passed} passed · {wrong} failed"),
        card(
            "Errors",
            fmt_int(summary.errors),
            "infrastructure, not wrong answers",
            tone="err" if summary.errors else None,
        ),
        card(
            "Tokens",
            fmt_int(summary.total_tokens),
            f"{fmt_int(summary.total_tokens / total)} per run" if total else None,
        ),
        card(
            "Cost",
            fmt_cost(cost),
            f"{fmt_cost(cost / total)} per run" if cost is not None and total else "no price known",
        ),
        card(
            "Duration",
            fmt_ms(summary.total_duration_ms),
            f"{fmt_ms(summary.avg_duration_ms)} per run on average",
        ),
        class_="cards",
    )


def _rate_tone(rate: float) -> str:
    return "good" if rate >= 80 else "fair" if rate >= 50 else "poor"


def performance_table(
    document: ResultsDocument,
    look: ModelLook,
    links: Links,
    day: date,
    selected: str | None,
) -> Markup:
    rows = []
    for rank, entry in enumerate(document.by_model, start=1):
        model = entry.model
        target = links.page("/", date=day.isoformat(), model=None if model == selected else model)
        rate = entry.pass_rate
        rows.append(
            el(
                "tr",
                cell(rank, num=True),
                cell(
                    join(dot(look.color(model)), link(target, look.name(model))),
                    sort=look.name(model),
                ),
                cell(
                    join(
                        el(
                            "span",
                            el("span", style=f"width:{rate:.1f}%", class_=_rate_tone(rate)),
                            class_="bar",
                        ),
                        f"{rate:.1f}%",
                        _interval_note(entry),
                    ),
                    sort=rate,
                    class_="nowrap",
                ),
                cell(f"{entry.passed}/{entry.total}", sort=entry.passed, num=True),
                cell(entry.errors, num=True),
                cell(fmt_int(entry.total_tokens), sort=entry.total_tokens, num=True),
                cell(fmt_cost(entry.total_cost_usd), sort=entry.total_cost_usd, num=True),
                cell(fmt_ms(entry.avg_duration_ms), sort=entry.avg_duration_ms, num=True),
                cell(fmt_ms(entry.p95_duration_ms), sort=entry.p95_duration_ms, num=True),
                cell(f"{entry.avg_tool_calls:.1f}", sort=entry.avg_tool_calls, num=True),
                data_href=target,
                data_model=model,
                class_="selected" if model == selected else None,
            )
        )
    headers = [
        ("#", "num"),
        ("Model", "text"),
        ("Pass rate", "num"),
        ("Passed", "num"),
        ("Errors", "num"),
        ("Tokens", "num"),
        ("Cost", "num"),
        ("Avg time", "num"),
        ("p95 time", "num"),
        ("Avg tools", "num"),
    ]
    return table(headers, rows, id_="models")


def _interval_note(entry: ModelEntry) -> Markup:
    low, high = entry.pass_rate_ci95
    return el(
        "span",
        f" ± {max(entry.pass_rate - low, high - entry.pass_rate):.1f}",
        class_="muted",
        title=f"95% interval {low:.1f}–{high:.1f}%",
    )


def comparisons_table(document: ResultsDocument, look: ModelLook) -> Markup:
    """Is the difference real? Each pair of the day's models on their shared tests."""
    rows = [
        el(
            "tr",
            cell(join(dot(look.color(c.model_a)), look.name(c.model_a)), sort=c.model_a),
            cell(join(dot(look.color(c.model_b)), look.name(c.model_b)), sort=c.model_b),
            cell(c.tests, num=True),
            cell(c.a_only, num=True),
            cell(c.b_only, num=True),
            cell(f"{c.p_value:.3f}", sort=c.p_value, num=True),
            cell(f"{c.p_adjusted:.3f}", sort=c.p_adjusted, num=True),
            cell("yes" if c.significant else "no — a tie"),
        )
        for c in document.comparisons
    ]
    headers = [
        ("Model A", "text"),
        ("Model B", "text"),
        ("Tests", "num"),
        ("A only", "num"),
        ("B only", "num"),
        ("p", "num"),
        ("p (Holm)", "num"),
        ("Significant", "text"),
    ]
    return table(headers, rows, id_="comparisons")


def budget_section(budget: BudgetOutcome, model: str | None, look: ModelLook) -> Markup:
    """Where the day's attempt budget went and what it decided (`eval-pipeline test --budget`)."""
    rows = [
        el(
            "tr",
            cell(look.name(m)),
            cell(test),
            cell(n, num=True),
            cell(reason or "first round"),
        )
        for m, test, n, reason in budget.attempts
        if n > 1 and (model is None or m == model)
    ]
    headers = [("Model", "text"), ("Test", "text"), ("Attempts", "num"), ("Why", "text")]
    limit = f"{budget.budget.runs} runs" if budget.budget.runs else f"${budget.budget.usd:g}"
    return section(
        "Attempt budget",
        el("ul", *(el("li", line) for line in budget.sentences()), id="budget-decision"),
        table(headers, rows, id_="budget-attempts", empty="Every test ran once per model."),
        extra=el(
            "span",
            f"{budget.spent_runs} runs spent of {limit} in {budget.rounds} round(s) · "
            f"question: {budget.question.kind} · anytime-valid",
            class_="extra",
        ),
        id_="budget-section",
    )


def _chip(result: ResultEntry, links: Links, look: ModelLook) -> Markup:
    status = result.status
    return link(
        links.run(result_run_id(result)),
        el("span", STATUS_ICONS.get(status, "·"), class_="icon"),
        fmt_ms(result.duration_ms),
        class_=f"chip chip-{status}",
        title=f"{result.name} · {look.name(result.model)} · attempt {result.attempt}: "
        f"{status} — {result.message or ''}",
        data_status=status,
    )


def case_model_grid(
    document: ResultsDocument, models: list[str], links: Links, look: ModelLook
) -> Markup:
    """One row per test, one column per model; each cell the attempts' status and time."""
    cells: dict[tuple[str, str], list[ResultEntry]] = {}
    names: list[str] = []
    for result in document.results:
        key = (result.name, result.model)
        if result.name not in names:
            names.append(result.name)
        cells.setdefault(key, []).append(result)
    rows = []
    for name in names:
        passing = sum(
            all(r.passed for r in cells.get((name, m), [])) and (name, m) in cells for m in models
        )
        present = sum((name, m) in cells for m in models)
        rows.append(
            el(
                "tr",
                cell(name, class_="mono"),
                [
                    cell(
                        join(_chip(r, links, look) for r in cells.get((name, m), []))
                        or el("span", "—", class_="muted"),
                        sort=sum(r.passed for r in cells.get((name, m), [])),
                        class_="cellrun",
                    )
                    for m in models
                ],
                cell(f"{passing}/{present}", sort=passing, num=True),
            )
        )
    headers = [
        ("Test", "text"),
        *((look.name(m), "num") for m in models),
        ("Models passing", "num"),
    ]
    return table(headers, rows, id_="grid")


def failures_table(document: ResultsDocument, links: Links, look: ModelLook) -> Markup:
    rows = [
        el(
            "tr",
            cell(badge(r.status), sort=r.status),
            cell(link(links.run(result_run_id(r)), r.name), sort=r.name, class_="mono"),
            cell(look.name(r.model)),
            cell(r.attempt, num=True),
            cell(el("div", r.message, class_="msg", title=r.message), sort=r.message),
        )
        for r in document.results
        if not r.passed
    ]
    headers = [("Status", "text"), ("Test", "text"), ("Model", "text"), ("Try", "num")]
    return table([*headers, ("Message", "text")], rows, empty="Every run passed.")


def _sentence(document: ResultsDocument) -> str:
    text = document.detectable_difference() or ""
    return text[:1].upper() + text[1:] + "."


def overview_body(
    document: ResultsDocument,
    *,
    day: date,
    days: list[date],
    model: str | None,
    previous: tuple[date, float] | None,
    look: ModelLook,
    links: Links,
) -> Markup:
    models = document.models
    names = {r.name for r in document.results}
    filter_pill = None
    if model:
        filter_pill = el(
            "span",
            f"model: {look.name(model)}",
            link(links.page("/", date=day.isoformat()), "✕", title="show every model"),
            class_="filter-pill",
        )
    actions = day_picker(day, days, model=model) if links.live else None
    sub = join(
        f"{day.isoformat()} · {len(models)} model(s) · {len(names)} test(s) ",
        filter_pill,
    )
    runs_link = links.page("/runs", date=day.isoformat(), model=model)
    return join(
        page_head("Overview", sub, actions),
        summary_cards(document, previous),
        section(
            "Performance by model",
            performance_table(document, look, links, day, model),
            extra=el(
                "span",
                "ranked by pass rate, then cost"
                + (" · click a model to filter" if links.live else ""),
                class_="extra",
            ),
        ),
        section(
            "Is the difference real?",
            comparisons_table(document, look),
            el("p", _sentence(document), class_="muted"),
            extra=el("span", "paired tests on shared tests, Holm-adjusted", class_="extra"),
            id_="comparisons-section",
        )
        if document.comparisons
        else None,
        budget_section(document.budget, model, look) if document.budget is not None else None,
        section(
            "Pass / fail by test and model",
            case_model_grid(document, models, links, look),
            extra=el("span", "each cell: every attempt's status and time", class_="extra"),
        ),
        section(
            "Runs that did not pass",
            failures_table(document, links, look),
            extra=link(runs_link, "all runs of the day →", class_="extra") if runs_link else None,
        )
        if links.live
        else None,
    )

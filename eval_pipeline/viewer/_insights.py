"""Pages over many days and people: trends (pass rate, cost, regressions, flaky tests) and labels."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any

from eval_pipeline.viewer._charts import ModelLook, cost_chart, dot, legend, pass_rate_chart
from eval_pipeline.viewer._html import (
    Markup,
    badge,
    cell,
    el,
    fmt_pct,
    join,
    section,
    table,
)
from eval_pipeline.viewer._labels import AgreementRow
from eval_pipeline.viewer._pages import link, page_head

WINDOWS = (7, 14, 30, 90, 365)


def _model_cell(model: str, look: ModelLook) -> Markup:
    return cell(join(dot(look.color(model)), look.name(model)), sort=look.name(model))


def _run_label(row: dict[str, Any], look: ModelLook) -> str:
    model = look.name(row["model"])
    return f"{row['name']} · {model} · {row['run_date'].isoformat()} · try {row['attempt']}"


def trends_body(
    points: list[dict[str, Any]],
    changes: list[dict[str, Any]],
    flaky: list[dict[str, Any]],
    *,
    start: date,
    end: date,
    window: int,
    look: ModelLook,
) -> Markup:
    # The charts draw the models by the names they are shown by.
    colors = {look.name(p["model"]): look.color(p["model"]) for p in points}
    models = sorted(colors)
    rates: dict[str, list[tuple[date, float]]] = defaultdict(list)
    intervals: dict[str, dict[date, tuple[float, float]]] = defaultdict(dict)
    costs: dict[date, dict[str, float]] = defaultdict(dict)
    for p in points:
        shown = look.name(p["model"])
        rates[shown].append((p["run_date"], p["pass_rate"] or 0.0))
        intervals[shown][p["run_date"]] = (p["ci_low"], p["ci_high"])
        costs[p["run_date"]][shown] = p["cost_usd"] or 0.0
    picker = el(
        "form",
        el("input", type="hidden", name="end", value=end.isoformat()),
        el(
            "label",
            "Window ",
            el(
                "select",
                [
                    el("option", f"last {w} days", value=str(w), selected=w == window)
                    for w in WINDOWS
                ],
                name="days",
            ),
        ),
        el("noscript", el("button", "Go", type="submit")),
        method="get",
        action="/trends",
        class_="autosubmit filters",
    )
    change_rows = [
        el(
            "tr",
            cell(r["run_date"].isoformat(), class_="nowrap"),
            cell(link(f"/run/{r['run_id']}", r["name"]), sort=r["name"], class_="mono"),
            _model_cell(r["model"], look),
            cell(
                badge(
                    "failed" if r["change"] == "regressed" else "passed",
                    "regressed" if r["change"] == "regressed" else "improved",
                ),
                sort=r["change"],
            ),
            cell(r["previous_date"].isoformat(), class_="nowrap"),
            cell(
                el("div", r["message"] or "", class_="msg", title=r["message"] or ""),
                sort=r["message"] or "",
                class_="fill",
            ),
            data_change=r["change"],
        )
        for r in changes
    ]
    flaky_rows = []
    for r in flaky:
        strip = el(
            "span",
            [
                el(
                    "a",
                    href=f"/run/{o['run_id']}",
                    class_=f"sq sq-{o['status']}",
                    title=f"{o['run_date'].isoformat()} · try {o['attempt']}: {o['status']}",
                    aria_label=f"{o['run_date'].isoformat()} try {o['attempt']} {o['status']}",
                )
                for o in r["outcomes"]
            ],
            class_="strip",
        )
        flaky_rows.append(
            el(
                "tr",
                cell(r["name"], class_="mono"),
                _model_cell(r["model"], look),
                cell(
                    f"{r['flaky_days']} of {r['evaluated_days']}",
                    sort=r["flaky_days"],
                    num=True,
                ),
                cell(strip),
            )
        )
    regressed = sum(r["change"] == "regressed" for r in changes)
    return join(
        page_head(
            "Trends",
            f"{start.isoformat()} → {end.isoformat()} · {len(models)} model(s)",
            picker,
        ),
        el(
            "div",
            section(
                "Pass rate per model",
                pass_rate_chart(rates, colors, intervals=intervals),
                legend(colors, models),
                id_="pass-rate-chart",
            ),
            section(
                "Cost per day",
                cost_chart(costs, colors, models),
                legend(colors, models),
                id_="cost-chart",
            ),
            class_="two-col",
        ),
        section(
            "Changed between days",
            table(
                [
                    ("Day", "text"),
                    ("Test", "text"),
                    ("Model", "text"),
                    ("Change", "text"),
                    ("Since", "text"),
                    ("Why", "text"),
                ],
                change_rows,
                id_="changes",
                empty="No test changed verdict between its model's evaluated days in this window.",
            ),
            extra=el(
                "span",
                f"{regressed} regressed, {len(changes) - regressed} improved · against the "
                "model's previous day with results",
                class_="extra",
            ),
        ),
        section(
            "Flaky tests",
            table(
                [
                    ("Test", "text"),
                    ("Model", "text"),
                    ("Mixed days", "num"),
                    ("Attempts on those days, oldest first", ""),
                ],
                flaky_rows,
                id_="flaky",
                empty="No test whose attempts disagreed on a day of this window.",
            ),
            extra=el(
                "span",
                "some attempts passed and some did not on the same day",
                class_="extra",
            ),
        ),
    )


def _kappa_words(kappa: float | None) -> str:
    """Landis & Koch's reading of κ."""
    if kappa is None:
        return "undefined"
    scale = ((0.0, "worse than chance"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"))
    for bound, words in (*scale, (0.8, "substantial")):
        if kappa < bound:
            return words
    return "almost perfect"


def labels_body(
    agreements: list[AgreementRow],
    labelled: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
    *,
    total_labels: int,
    look: ModelLook,
) -> Markup:
    rows = []
    for row in agreements:
        a = row.result
        # rounded as shown, so a float's -0.00 reads as 0.00 ("slight"), not "worse than chance"
        kappa = None if a.kappa is None else round(a.kappa, 2) + 0.0
        rows.append(
            el(
                "tr",
                cell(el("strong", row.grader) if row.kind == "overall" else row.grader),
                cell(row.kind),
                cell(a.n, num=True),
                cell(fmt_pct(a.raw), sort=a.raw, num=True),
                cell(
                    join(
                        "—" if kappa is None else f"{kappa:.2f}",
                        el("span", f" {_kappa_words(kappa)}", class_="muted"),
                    ),
                    sort=kappa,
                    num=True,
                ),
                cell(a.both_pass, num=True),
                cell(a.both_fail, num=True),
                cell(a.judge_pass_human_fail, num=True),
                cell(a.judge_fail_human_pass, num=True),
                data_grader=row.grader,
            )
        )
    history = [
        el(
            "tr",
            cell(r["labelled_at"].strftime("%Y-%m-%d %H:%M"), class_="nowrap"),
            cell(link(f"/run/{r['run_id']}", _run_label(r, look)), sort=r["name"]),
            cell(
                badge("passed" if r["label_passed"] else "failed"),
                sort=str(r["label_passed"]),
            ),
            cell(badge(r["status"]) if r["status"] else el("span", "not graded", class_="muted")),
            cell(el("div", r["note"], class_="msg", title=r["note"]), sort=r["note"]),
            cell(r["author"] or "—"),
        )
        for r in labelled
    ]
    waiting_rows = [
        el(
            "tr",
            cell(link(f"/run/{r['run_id']}", r["name"]), sort=r["name"], class_="mono"),
            cell(look.name(r["model"])),
            cell(r["run_date"].isoformat()),
            cell(r["attempt"], num=True),
            cell(badge(r["status"]), sort=r["status"]),
        )
        for r in waiting
    ]
    return join(
        page_head(
            "Labels",
            f"{len(labelled)} labelled run(s), {total_labels} label(s) in all; "
            "label a run from its page",
        ),
        section(
            "Judge–human agreement",
            el(
                "p",
                "Each labelled run's latest label against the grade's verdicts: overall (the "
                "grade), each LLM evaluator and each check. Raw agreement and Cohen's κ "
                "(agreement corrected for chance); runs graded error are left out.",
                class_="muted",
            ),
            table(
                [
                    ("Grader", "text"),
                    ("Kind", "text"),
                    ("Labelled runs", "num"),
                    ("Agreement", "num"),
                    ("Cohen's κ", "num"),
                    ("Both pass", "num"),
                    ("Both fail", "num"),
                    ("Judge pass, human fail", "num"),
                    ("Judge fail, human pass", "num"),
                ],
                rows,
                id_="agreement",
                empty="No labelled run yet: open a run and mark it passed or failed.",
            ),
        ),
        section(
            "Judged runs waiting for a label",
            table(
                [
                    ("Test", "text"),
                    ("Model", "text"),
                    ("Day", "text"),
                    ("Try", "num"),
                    ("Grade", "text"),
                ],
                waiting_rows,
                empty="Every run an LLM evaluator judged has a label.",
            ),
        ),
        section(
            "Latest label per run",
            table(
                [
                    ("Labelled", "text"),
                    ("Run", "text"),
                    ("Human", "text"),
                    ("Grade", "text"),
                    ("Note", "text"),
                    ("By", "text"),
                ],
                history,
                id_="labels",
                empty="No label yet.",
            ),
        ),
    )

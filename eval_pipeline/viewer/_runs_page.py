"""The runs table: every graded run in the store, filtered by day, model, status, tag and text."""

from __future__ import annotations

from datetime import date
from typing import Any

from eval_pipeline.viewer._charts import ModelLook
from eval_pipeline.viewer._html import (
    Markup,
    badge,
    cell,
    el,
    fmt_cost,
    fmt_int,
    fmt_ms,
    join,
    section,
    table,
)
from eval_pipeline.viewer._pages import link, page_head


def _select(name: str, label: str, options: list[tuple[str, str]], value: str | None) -> Markup:
    return el(
        "label",
        label,
        el(
            "select",
            [el("option", text, value=v, selected=(v == (value or ""))) for v, text in options],
            name=name,
        ),
    )


def runs_body(
    rows: list[dict[str, Any]],
    *,
    filters: dict[str, Any],
    days: list[date],
    models: list[str],
    tags: list[str],
    limit: int,
    look: ModelLook,
) -> Markup:
    day = filters.get("date") or ""
    form = el(
        "form",
        _select(
            "date",
            "Day",
            [("all", "All days"), *((d.isoformat(), d.isoformat()) for d in days)],
            day,
        ),
        _select(
            "model",
            "Model",
            [("", "All models"), *((m, look.name(m)) for m in models)],
            filters["model"],
        ),
        _select(
            "status",
            "Status",
            [("", "Any status"), ("passed", "passed"), ("failed", "failed"), ("error", "error")],
            filters["status"],
        ),
        _select("tag", "Tag", [("", "Any tag"), *((t, t) for t in tags)], filters["tag"]),
        el(
            "label",
            "Text",
            el(
                "input",
                type="search",
                name="q",
                value=filters["q"] or "",
                placeholder="test, model or message",
                data_filter_table="runs",
                data_filter_count="row-count",
            ),
        ),
        el("button", "Apply", type="submit"),
        link("/runs", "Reset", class_="button secondary"),
        method="get",
        action="/runs",
        class_="filters autosubmit",
    )
    table_rows = []
    for r in rows:
        human = r.get("label_passed")
        table_rows.append(
            el(
                "tr",
                cell(r["run_date"].isoformat(), class_="nowrap"),
                cell(link(f"/run/{r['run_id']}", r["name"]), sort=r["name"], class_="mono"),
                cell(look.name(r["model"])),
                cell(r["attempt"], num=True),
                cell(badge(r["status"]), sort=r["status"]),
                cell(
                    badge("passed" if human else "failed", "human ✓" if human else "human ✗")
                    if human is not None
                    else el("span", "—", class_="muted"),
                    sort="" if human is None else str(human),
                ),
                cell(
                    el("div", r["message"], class_="msg", title=r["message"]),
                    sort=r["message"],
                    class_="fill",
                ),
                cell(fmt_int(r["tokens"]), sort=r["tokens"], num=True),
                cell(fmt_cost(r["cost_usd"]), sort=r["cost_usd"], num=True),
                cell(fmt_ms(r["duration_ms"]), sort=r["duration_ms"], num=True),
                cell(r["tool_call_count"], num=True),
                data_status=r["status"],
                data_model=r["model"],
            )
        )
    headers = [
        ("Day", "text"),
        ("Test", "text"),
        ("Model", "text"),
        ("Try", "num"),
        ("Status", "text"),
        ("Label", "text"),
        ("Message", "text"),
        ("Tokens", "num"),
        ("Cost", "num"),
        ("Time", "num"),
        ("Tools", "num"),
    ]
    count = el("span", el("span", str(len(rows)), id="row-count"), " run(s)")
    capped = (
        el(
            "p",
            f"Showing the first {limit:,} runs; narrow the filters to see others.",
            class_="muted",
        )
        if len(rows) >= limit
        else None
    )
    return join(
        page_head("Runs", "every graded run in the store; click a column to sort"),
        el("div", form, class_="panel"),
        section(
            "Runs",
            table(headers, table_rows, id_="runs", empty="No run matches these filters."),
            capped,
            extra=el("span", count, class_="extra"),
        ),
    )

"""One run's page: the sections, its numbers, its history across days and the label form."""

from __future__ import annotations

from typing import Any

from eval_pipeline.viewer._charts import ModelLook
from eval_pipeline.viewer._html import (
    Child,
    Markup,
    badge,
    el,
    fmt_cost,
    fmt_int,
    fmt_ms,
    fmt_time,
    join,
    section,
    url,
)
from eval_pipeline.viewer._labels import MAX_AUTHOR, MAX_NOTE
from eval_pipeline.viewer._pages import Links, link, page_head
from eval_pipeline.viewer._run_checks import checks_panel
from eval_pipeline.viewer._run_sections import (
    conversation_panel,
    data_check,
    data_panel,
    nao_verification_panel,
    reference_panel,
    reply_panel,
    tool_calls_panel,
)


def _kv(items: list[tuple[str, Child]]) -> Markup:
    return el(
        "dl", [join(el("dt", k), el("dd", v)) for k, v in items if v not in (None, "")], class_="kv"
    )


def _when(run: dict[str, Any]) -> list[tuple[str, Child]]:
    """When the run was made. A reused run was made by an earlier invocation: its start is
    that one's, so the page says so and when this invocation took it over."""
    started = fmt_time(run.get("started_at")) if run.get("started_at") else None
    if not run.get("reused"):
        return [("Started", started)]
    return [
        (
            "Reused",
            join(
                "yes: an earlier invocation made this run, and the one of ",
                fmt_time(run.get("stored_at")),
                " reused it (its test, model, context, attempt and day were unchanged)",
            ),
        ),
        ("Started", join(started, el("span", " (by the earlier invocation)", class_="muted"))),
    ]


def numbers_panel(run: dict[str, Any], look: ModelLook) -> Markup:
    tokens = join(
        fmt_int(run["tokens"]),
        el(
            "span",
            f"  in {fmt_int(run.get('input_tokens'))} (cached {fmt_int(run.get('cached_input_tokens'))})"
            f" · out {fmt_int(run.get('output_tokens'))}",
            class_="muted",
        )
        if run.get("input_tokens") is not None
        else None,
    )
    tags = ", ".join(run.get("tags") or [])
    return section(
        "Run",
        _kv(
            [
                ("Status", badge(run["status"])),
                ("Model", look.name(run["model"])),
                ("Day", run["run_date"].isoformat()),
                ("Attempt", str(run["attempt"])),
                ("Tokens", tokens),
                ("Cost", fmt_cost(run["cost_usd"])),
                ("Time", fmt_ms(run["duration_ms"])),
                ("Turns", fmt_int(run.get("turns"))),
                ("Tool calls", fmt_int(run["tool_call_count"])),
                *_when(run),
                ("Run key", el("span", run.get("run_key"), class_="mono")),
            ]
        ),
        el("hr"),
        _kv(
            [
                (
                    "Test file",
                    el("span", run.get("file"), class_="mono") if run.get("file") else None,
                ),
                ("Tags", tags),
                ("Category", run.get("category")),
                ("Difficulty", run.get("difficulty")),
                ("Notes", run.get("notes")),
            ]
        ),
        id_="numbers",
    )


def history_panel(run: dict[str, Any], history: list[dict[str, Any]], links: Links) -> Markup:
    squares = [
        el(
            "a" if links.live else "span",
            href=links.run(h["run_id"]) if links.live else None,
            class_=f"sq sq-{h['status']}" + (" current" if h["run_id"] == run["run_id"] else ""),
            title=f"{h['run_date'].isoformat()} · try {h['attempt']}: {h['status']}",
            aria_label=f"{h['run_date'].isoformat()} try {h['attempt']} {h['status']}",
        )
        for h in history
    ]
    passes = sum(h["status"] == "passed" for h in history)
    return section(
        "This test over time",
        el("div", squares, class_="strip"),
        el("p", f"{passes} of {len(history)} attempt(s) passed, oldest first", class_="muted"),
        id_="history",
    )


def label_panel(run: dict[str, Any], labels: list[dict[str, Any]], notice: str | None) -> Markup:
    latest = labels[0] if labels else None
    form = el(
        "form",
        el(
            "div",
            el(
                "label",
                el(
                    "input",
                    type="radio",
                    name="verdict",
                    value="passed",
                    required=True,
                    checked=bool(latest and latest["passed"]),
                ),
                "Passed",
            ),
            el(
                "label",
                el(
                    "input",
                    type="radio",
                    name="verdict",
                    value="failed",
                    checked=bool(latest and not latest["passed"]),
                ),
                "Failed",
            ),
            class_="radio-row",
        ),
        el(
            "textarea",
            name="note",
            placeholder="Why? (optional)",
            maxlength=str(MAX_NOTE),
            aria_label="note",
        ),
        el(
            "div",
            el(
                "input",
                type="text",
                name="author",
                placeholder="Your name (optional)",
                maxlength=str(MAX_AUTHOR),
                aria_label="your name",
            ),
            el("button", "Save label", type="submit"),
            class_="form-row",
        ),
        method="post",
        action=url(f"/run/{run['run_id']}/label"),
        id="label-form",
    )
    history = [
        el(
            "li",
            el(
                "div",
                badge(
                    "passed" if item["passed"] else "failed",
                    "human: passed" if item["passed"] else "human: failed",
                ),
                el(
                    "span",
                    f"  {item['labelled_at'].strftime('%Y-%m-%d %H:%M')} UTC",
                    class_="muted",
                ),
                el("span", f" · {item['author']}", class_="muted") if item.get("author") else None,
            ),
            el("p", item["note"], class_="reason") if item.get("note") else None,
            class_="label-entry",
        )
        for item in labels
    ]
    return section(
        "Human label",
        el("div", notice, class_="notice", role="status") if notice else None,
        el(
            "p",
            "Do you agree with the grade? Your verdict is compared with the judges' on the Labels page.",
            class_="muted",
        ),
        form,
        el("ul", history, class_="verdicts", id="label-history") if history else None,
        id_="label",
    )


def run_header(
    run: dict[str, Any],
    links: Links,
    previous: str | None,
    following: str | None,
    look: ModelLook,
) -> Markup:
    day = run["run_date"].isoformat()
    crumbs = join(
        link(links.page("/", date=day), "Overview"),
        " / ",
        link(links.page("/runs", date=day), f"Runs of {day}"),
    )
    sub = join(
        badge(run["status"]),
        f"  {look.name(run['model'])} · {day} · attempt {run['attempt']} · ",
        el("span", run["message"], class_="muted"),
    )
    actions = (
        join(
            link(
                links.run(previous) if previous else None,
                "← previous run",
                class_="button secondary",
                id="prev-run",
            ),
            link(
                links.run(following) if following else None,
                "next run →",
                class_="button secondary",
                id="next-run",
            ),
        )
        if links.live
        else None
    )
    return page_head(run["name"], sub, actions, crumbs)


def audit_panel(run: dict[str, Any]) -> Markup | None:
    """Beyond the comparison: the semantic check, why a failed query missed, and warnings
    about the reference itself (a warning questions the test, not the agent)."""
    details = data_check(run)
    semantic, kind = details.get("semantic"), details.get("failure_kind")
    warnings = details.get("reference_warnings") or []
    if not semantic and not kind and not warnings:
        return None
    items: list[tuple[str, Child]] = []
    if semantic:
        items.append(("Semantic check", join(badge(semantic["status"]), " ", semantic["message"])))
    if kind:
        items.append(("Failure kind", join(el("code", kind), " ", details.get("failure_detail"))))
    body = [_kv(items)] if items else []
    if warnings:
        body.append(el("h3", "Reference warnings"))
        body.append(
            el("ul", *(el("li", el("code", w["kind"]), " ", w["message"]) for w in warnings))
        )
    return section("Semantic check and reference health", *body, id_="audit")


def run_sections(run: dict[str, Any]) -> list[Markup | None]:
    """The run's own content, shared by the page and the HTML export."""
    return [
        reply_panel(run),
        checks_panel(run),
        audit_panel(run),
        data_panel(run, prefix=f"r{run['run_id']}"),
        reference_panel(run),
        nao_verification_panel(run),
        tool_calls_panel(run),
        conversation_panel(run),
    ]


def run_body(
    run: dict[str, Any],
    *,
    links: Links,
    previous: str | None,
    following: str | None,
    history: list[dict[str, Any]],
    labels: list[dict[str, Any]],
    look: ModelLook,
    notice: str | None = None,
) -> Markup:
    return join(
        run_header(run, links, previous, following, look),
        el(
            "div",
            el("div", run_sections(run)),
            el(
                "div",
                label_panel(run, labels, notice),
                numbers_panel(run, look),
                history_panel(run, history, links),
            ),
            class_="side",
        ),
    )

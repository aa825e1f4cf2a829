"""A run's checks as a person reads them: each verdict, the judges' reasoning, consistency pairs."""

from __future__ import annotations

from typing import Any

from eval_pipeline.viewer._html import (
    Child,
    Markup,
    badge,
    code_block,
    el,
    fmt_pct,
    join,
    pretty_json,
    section,
)
from eval_pipeline.viewer._sql import pretty_sql


def _check_details(check: dict[str, Any]) -> Child:
    details = check.get("details") or {}
    kind = check.get("kind")
    if kind == "evaluators":
        return el(
            "ul",
            [
                el(
                    "li",
                    el(
                        "div",
                        badge(
                            "error"
                            if v.get("passed") is None
                            else "passed"
                            if v["passed"]
                            else "failed",
                            str(v.get("evaluator")),
                        ),
                        el("span", f"  {v.get('criteria') or ''}", class_="muted"),
                    ),
                    el("p", v.get("reasoning") or v.get("error") or "", class_="reason"),
                )
                for v in details.get("evaluators") or []
            ],
            class_="verdicts",
        )
    if kind == "consistency":
        pairs = [
            el(
                "li",
                el(
                    "div",
                    badge(
                        "error"
                        if p.get("consistent") is None
                        else "passed"
                        if p["consistent"]
                        else "failed",
                        f"attempts {p.get('attempts', ['?', '?'])[0]} ↔ {p.get('attempts', ['?', '?'])[-1]}",
                    ),
                ),
                el("p", p.get("reasoning") or p.get("error") or "", class_="reason"),
            )
            for p in details.get("pairs") or []
        ]
        best = details.get("most_consistent_reply")
        return join(
            el(
                "p",
                f"accuracy {fmt_pct(details.get('accuracy'), 0)} "
                f"(minimum {fmt_pct(details.get('min_accuracy'), 0)}); most consistent attempt: "
                f"{details.get('most_consistent_attempt', '—')}",
                class_="muted",
            )
            if details
            else None,
            el("ul", pairs, class_="verdicts") if pairs else None,
            el("details", el("summary", "most consistent reply"), el("pre", best, class_="text"))
            if best
            else None,
        )
    if kind == "tool_calls":
        judged = details.get("judged_arguments") or []
        return join(
            el(
                "p",
                "called: " + (", ".join(details.get("actual_tools") or []) or "none"),
                class_="muted",
            )
            if details
            else None,
            el(
                "ul",
                [el("li", el("pre", pretty_json(j), class_="text mono")) for j in judged],
                class_="verdicts",
            )
            if judged
            else None,
        )
    if kind == "data" and details.get("extraction_query"):
        return join(
            el(
                "div",
                f"answer extracted by: {details.get('extraction_source') or '—'}",
                class_="label-small",
            ),
            code_block(pretty_sql(details["extraction_query"]), language="sql"),
        )
    if kind == "data":
        return None
    # Assertions, and any check added through the registry: its details as they are.
    return el("pre", pretty_json(details), class_="code") if details else None


def checks_panel(run: dict[str, Any]) -> Markup:
    checks = run["checks"]
    body = [
        el(
            "div",
            el(
                "div",
                el("span", str(c.get("kind")), class_="check-kind"),
                badge(c.get("status")),
                class_="check-head",
            ),
            el("p", c.get("message") or "", class_="reason"),
            _check_details(c),
            class_="check",
        )
        for c in checks
    ]
    if not checks:
        body = [
            el(
                "p",
                "No check ran: " + (run["message"] or "the test has no check."),
                class_="muted",
            )
        ]
    return section("Checks", body, id_="checks")

"""The sections of a run's page: reply, data (actual / expected / diff), reference SQL,
nao's own verification (a run of nao's agent), tool calls and the conversation."""

from __future__ import annotations

import json
from typing import Any

from eval_pipeline.pipeline import nao_verdict
from eval_pipeline.viewer._diffs import diff_marks, map_columns
from eval_pipeline.viewer._html import (
    Child,
    Markup,
    badge,
    code_block,
    data_table,
    el,
    fmt_int,
    fmt_ms,
    join,
    pretty_json,
    section,
)
from eval_pipeline.viewer._sql import pretty_sql

PREVIEW_CHARS = 4000


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    return (
        text
        if len(text) <= limit
        else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"
    )


def data_check(run: dict[str, Any]) -> dict[str, Any]:
    for check in run["checks"]:
        if check.get("kind") == "data":
            return check.get("details") or {}
    return {}


# ---- data -----------------------------------------------------------------------------------


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def data_panel(run: dict[str, Any], prefix: str) -> Markup | None:
    details = data_check(run)
    actual, expected = details.get("actual_data"), details.get("expected_data")
    diff = details.get("diff") or []
    if actual is None and expected is None:
        return None
    marks = diff_marks(diff)
    actual = actual or []
    expected = expected or []
    a_cols, e_cols = _columns(actual), _columns(expected)
    tabs: list[tuple[str, str, Markup]] = []
    if diff:
        sides = [r.get("_side", "") for r in diff]
        tabs.append(
            (
                "diff",
                f"Diff ({len(diff)})",
                data_table(
                    marks.columns,
                    diff,
                    row_classes=[
                        "row-actual" if s.startswith("actual") else "row-expected" for s in sides
                    ],
                    cell_classes=marks.diff_cells,
                    leading=[("side", sides), ("row", [r.get("_row") for r in diff])],
                ),
            )
        )
    tabs.append(
        (
            "actual",
            f"Actual ({len(actual)})",
            data_table(
                a_cols,
                actual,
                row_classes=[
                    "row-diff" if i in marks.actual_rows else None for i in range(len(actual))
                ],
                cell_classes=[
                    map_columns(marks.actual_rows[i], a_cols) if i in marks.actual_rows else set()
                    for i in range(len(actual))
                ],
            ),
        )
    )
    tabs.append(
        (
            "expected",
            f"Expected ({len(expected)})",
            data_table(
                e_cols,
                expected,
                row_classes=[
                    "row-diff" if i in marks.expected_rows else None for i in range(len(expected))
                ],
                cell_classes=[
                    map_columns(marks.expected_rows[i], e_cols)
                    if i in marks.expected_rows
                    else set()
                    for i in range(len(expected))
                ],
            ),
        )
    )
    tab_list = el(
        "div",
        [
            el(
                "button",
                label,
                type="button",
                role="tab",
                id=f"{prefix}-tab-{key}",
                aria_controls=f"{prefix}-panel-{key}",
                aria_selected="true" if i == 0 else "false",
                data_tab=key,
            )
            for i, (key, label, _) in enumerate(tabs)
        ],
        role="tablist",
    )
    panels = [
        el(
            "div",
            content,
            role="tabpanel",
            id=f"{prefix}-panel-{key}",
            aria_labelledby=f"{prefix}-tab-{key}",
            hidden=i != 0,
        )
        for i, (key, _, content) in enumerate(tabs)
    ]
    ordered = details.get("ordered")
    extra = (
        None
        if ordered is None
        else ("rows compared in order" if ordered else "rows compared as a multiset")
    )
    return section(
        "Data", tab_list, panels, id_=f"{prefix}-data", extra=el("span", extra, class_="extra")
    )


# ---- tool calls and conversation ------------------------------------------------------------


def _arguments(call: dict[str, Any]) -> Markup:
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        return code_block(str(call.get("raw_arguments") or ""))
    if call.get("name") == "execute_sql" and isinstance(arguments.get("sql_query"), str):
        rest = {k: v for k, v in arguments.items() if k != "sql_query"}
        return join(
            code_block(pretty_sql(arguments["sql_query"]), language="sql"),
            join(el("div", "other arguments", class_="label-small"), code_block(pretty_json(rest)))
            if rest
            else None,
        )
    return code_block(pretty_json(arguments))


def _result(call: dict[str, Any]) -> Child:
    result = call.get("result")
    if isinstance(result, dict) and "preview" in result:
        head = f"{result.get('query_id', '')} · {fmt_int(result.get('row_count'))} row(s)" + (
            " (truncated)" if result.get("truncated") else ""
        )
        return join(
            el("div", "result · " + head, class_="label-small"),
            code_block(_clip(str(result.get("preview") or ""))),
        )
    if result is None:
        return None
    return join(el("div", "result", class_="label-small"), code_block(_clip(pretty_json(result))))


def tool_calls_panel(run: dict[str, Any]) -> Markup:
    calls = run["run_tool_calls"]
    items = [
        el(
            "div",
            el(
                "div",
                el("span", f"#{i + 1}", class_="muted"),
                el("span", str(call.get("name")), class_="tc-name"),
                badge("error", "error") if call.get("error") else None,
                el("span", fmt_ms(call.get("duration_ms")), class_="muted"),
                class_="tc-head",
            ),
            el(
                "div",
                el("div", "arguments", class_="label-small"),
                _arguments(call),
                el("div", el("pre", call["error"], class_="text"), class_="alert")
                if call.get("error")
                else None,
                _result(call),
                class_="tc-body",
            ),
            class_="toolcall",
        )
        for i, call in enumerate(calls)
    ]
    return section(
        "Tool calls",
        items or el("p", "The agent called no tool.", class_="muted"),
        id_="tool-calls",
        extra=el("span", f"{len(calls)} call(s)", class_="extra"),
    )


def conversation_panel(run: dict[str, Any]) -> Markup:
    items = []
    for message in run["messages"]:
        role = str(message.get("role") or "?")
        content = str(message.get("content") or "")
        calls = message.get("tool_calls") or []
        body: list[Child] = []
        if content:
            text = el("pre", _clip(content), class_="text")
            if role in ("system", "tool"):
                title = (
                    "system prompt"
                    if role == "system"
                    else f"tool result ({message.get('name') or 'tool'})"
                )
                body.append(
                    el("details", el("summary", f"{title} · {len(content):,} characters"), text)
                )
            else:
                body.append(text)
        for call in calls:
            arguments = call.get("arguments")
            shown = arguments if isinstance(arguments, dict) else call.get("raw_arguments")
            body.append(
                el(
                    "div",
                    el("span", "→ ", class_="muted"),
                    el("span", str(call.get("name")), class_="tc-name"),
                    el(
                        "span",
                        " " + _clip(json.dumps(shown, ensure_ascii=False, default=str), 300),
                        class_="mono muted",
                    ),
                )
            )
        items.append(el("div", el("div", role, class_="role"), body, class_=f"m m-{role}"))
    return section(
        "Conversation",
        el("div", items, class_="msgs")
        if items
        else el("p", "No transcript stored.", class_="muted"),
        id_="conversation",
    )


def reply_panel(run: dict[str, Any]) -> Markup:
    text = run.get("final_text")
    error = run.get("run_error")
    return section(
        "Final reply",
        el("div", el("pre", text, class_="text"), class_="reply", id="final-reply")
        if text
        else el("p", "No reply.", class_="muted"),
        el("div", el("strong", "Error: "), error, class_="alert", id="run-error")
        if error
        else None,
        id_="reply",
    )


def reference_panel(run: dict[str, Any]) -> Markup | None:
    sql = data_check(run).get("reference_sql") or run.get("case_sql")
    if not sql:
        return None
    return section(
        "Reference SQL", code_block(pretty_sql(sql), language="sql"), id_="reference-sql"
    )


def nao_verification_panel(run: dict[str, Any]) -> Markup | None:
    """A run of nao's agent (`nao:` models): the query nao verified the answer with, and the
    verdict nao's own comparison gives it, beside ours (they may disagree: nao compares rows
    in any order, for one)."""
    nao = nao_verdict(run.get("answerer_details"))
    if nao is None:
        return None
    theirs = {True: "passed", False: "failed", None: "none"}[nao["passed"]]
    ours = "passed" if run.get("passed") else run.get("status") or "failed"
    return section(
        "nao's verification",
        el(
            "p",
            el("strong", "nao's verdict: "),
            badge(theirs),
            " ",
            nao.get("message"),
            el("span", f" (ours: {ours})", class_="muted"),
            id="nao-verdict",
        ),
        el("div", el("strong", "Error: "), nao["error"], class_="alert") if nao["error"] else None,
        code_block(pretty_sql(nao["sql"]), language="sql") if nao["sql"] else None,
        id_="nao-verification",
    )

"""Safe HTML building: every value is escaped unless it is `Markup` this package built itself."""

from __future__ import annotations

import html
import json
import math
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from eval_pipeline.suite import printable


class Markup(str):
    """HTML that this package built; anything else put into a page is escaped."""

    __slots__ = ()


Child = Any  # str | Markup | number | None | Iterable of those


def esc(value: Any) -> Markup:
    """Text as HTML: `<script>` from an agent's reply shows as the characters `<script>`,
    and a control character as its escape (`\\x1b`): a page exported to stdout reaches a
    terminal, and a browser would hide it."""
    if isinstance(value, Markup):
        return value
    if value is None:
        return Markup("")
    return Markup(html.escape(printable(str(value), lines=True), quote=True))


def _children(children: Iterable[Child]) -> Iterable[str]:
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, str | int | float):
            yield esc(child)
        else:
            yield from _children(child)


def join(*children: Child) -> Markup:
    return Markup("".join(_children(children)))


_VOID = frozenset({"br", "hr", "input", "meta", "link", "img", "col"})


def el(tag: str, *children: Child, **attrs: Any) -> Markup:
    """`<tag attrs>children</tag>`; `class_` → class, `data_x` → data-x; None/False omitted."""
    parts = [tag]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{join(*children)}</{tag}>")


def url(path: str, **params: Any) -> str:
    """An internal URL: path segments percent-encoded, empty parameters dropped."""
    quoted = urllib.parse.quote(path, safe="/")
    query = {k: v for k, v in params.items() if v not in (None, "", False)}
    return quoted + ("?" + urllib.parse.urlencode(query, doseq=True) if query else "")


def run_url(run_key: str) -> str:
    return url(f"/run/{run_key}")


# ---- formatting -----------------------------------------------------------------------------


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_int(value: Any) -> str:
    return "—" if is_missing(value) else f"{int(value):,}"


def fmt_cost(value: Any) -> str:
    if is_missing(value):
        return "—"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def fmt_ms(value: Any) -> str:
    if is_missing(value):
        return "—"
    seconds = float(value) / 1000
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 120:
        return f"{seconds:.1f}s"
    return f"{seconds / 60:.1f}m"


def fmt_pct(value: Any, digits: int = 1) -> str:
    return "—" if is_missing(value) else f"{100 * value:.{digits}f}%"


# How pandas writes a timestamp as ISO text (`to_json(date_format="iso")`): grades written
# before the data check kept dates as written held their diffs this way, a DATE as
# `2026-01-01T00:00:00.000Z` (the Z is pandas', not the data's: the comparison made it UTC).
_PANDAS_ISO = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{3})Z?")


def fmt_value(value: Any) -> str:
    """A data cell: NULL visible, floats without noise, a date as a date."""
    if value is None:
        return "NULL"
    if isinstance(value, str) and (stamp := _PANDAS_ISO.fullmatch(value)):
        day, time, fraction = stamp.groups()
        if time == "00:00:00" and fraction == ".000":
            return day
        return f"{day} {time}{'' if fraction == '.000' else fraction}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        text = f"{value:.10g}"
        # 310.0 stays a float on the page, as in the comparison's message
        return text if any(c in text for c in ".eni") else text + ".0"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def fmt_time(value: Any) -> str:
    """A moment as `2026-06-01 06:00:09 UTC`: ISO text or a datetime, in UTC when it has a
    zone; one without a zone is shown without one (no zone is made up)."""
    if is_missing(value) or value == "":
        return "—"
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(moment, datetime):
        return str(value)
    if moment.tzinfo is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# ---- components -----------------------------------------------------------------------------

STATUS_ICONS = {"passed": "✓", "failed": "✗", "error": "!"}


def badge(status: str | None, text: str | None = None) -> Markup:
    status = status or "unknown"
    return el(
        "span",
        el("span", STATUS_ICONS.get(status, "·"), class_="icon", aria_hidden="true"),
        text if text is not None else status,
        class_=f"badge badge-{status if status in STATUS_ICONS else 'unknown'}",
    )


def card(title: str, value: str, sub: Child = None, *, tone: str | None = None) -> Markup:
    return el(
        "div",
        el("div", title, class_="card-title"),
        el("div", value, class_="card-value" + (f" tone-{tone}" if tone else "")),
        el("div", sub, class_="card-sub") if sub else None,
        class_="card",
    )


def section(title: str, *children: Child, id_: str | None = None, extra: Child = None) -> Markup:
    return el(
        "section",
        el("div", el("h2", title), extra, class_="section-head"),
        *children,
        class_="panel",
        id=id_,
    )


def table(
    headers: Iterable[tuple[str, str]],
    rows: Iterable[Markup],
    *,
    id_: str | None = None,
    sortable: bool = True,
    empty: str = "Nothing to show.",
) -> Markup:
    """A table; `headers` are (label, kind) with kind "text" / "num" / "" (not sortable)."""
    headers, rows = list(headers), list(rows)
    head = el(
        "tr",
        [
            el(
                "th",
                label,
                data_kind=kind or None,
                class_=("num" if kind == "num" else None),
                tabindex="0" if sortable and kind else None,
                aria_sort="none" if sortable and kind else None,
            )
            for label, kind in headers
        ],
    )
    body = rows or [el("tr", el("td", empty, colspan=str(len(headers)), class_="empty"))]
    return el(
        "div",
        el(
            "table",
            el("thead", head),
            el("tbody", body),
            id=id_,
            class_="data" + (" sortable" if sortable else ""),
        ),
        class_="table-wrap",
    )


def cell(value: Child, *, sort: Any = None, num: bool = False, class_: str | None = None) -> Markup:
    """A table cell; `sort` is the value the column sorts by (defaults to the text)."""
    classes = " ".join(c for c in ("num" if num else None, class_) if c)
    return el(
        "td",
        value,
        data_sort=None if sort is None else (fmt_value(sort) if not is_missing(sort) else ""),
        class_=classes or None,
    )


def data_table(
    columns: list[str],
    rows: list[Mapping[str, Any]],
    *,
    row_classes: list[str | None] | None = None,
    cell_classes: list[set[str]] | None = None,
    leading: list[tuple[str, list[Child]]] | None = None,
    limit: int = 200,
) -> Markup:
    """Rows of a result (actual / expected / diff), with chosen rows and cells highlighted."""
    lead = leading or []
    header = el(
        "tr",
        [el("th", label, class_="meta") for label, _ in lead],
        [el("th", c) for c in columns],
    )
    body = []
    for i, row in enumerate(rows[:limit]):
        marked = cell_classes[i] if cell_classes else set()
        body.append(
            el(
                "tr",
                [el("td", values[i], class_="meta") for _, values in lead],
                [
                    el(
                        "td",
                        fmt_value(row.get(c)),
                        class_=" ".join(
                            x
                            for x in (
                                "cell-diff" if c in marked else None,
                                "null" if row.get(c) is None else None,
                            )
                            if x
                        )
                        or None,
                    )
                    for c in columns
                ],
                class_=row_classes[i] if row_classes else None,
            )
        )
    more = (
        el("p", f"{len(rows) - limit:,} more row(s) not shown.", class_="muted")
        if len(rows) > limit
        else None
    )
    if not rows:
        return el("p", "No rows.", class_="muted")
    return join(
        el(
            "div",
            el("table", el("thead", header), el("tbody", body), class_="data result"),
            class_="table-wrap",
        ),
        more,
    )


def code_block(text: str, *, language: str = "") -> Markup:
    return el("pre", el("code", text), class_="code" + (f" lang-{language}" if language else ""))

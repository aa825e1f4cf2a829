"""One self-contained HTML file of a day's results (overview, grid, failed runs with their
diffs), readable with no server: inline CSS, no external resource, links to anchors."""

from __future__ import annotations

from datetime import UTC, date, datetime

from eval_pipeline.store import StateFolder, with_recovery
from eval_pipeline.viewer import _data as data
from eval_pipeline.viewer._html import badge, el, join, section
from eval_pipeline.viewer._pages import Links, overview_body
from eval_pipeline.viewer._reader import StoreReader
from eval_pipeline.viewer._run_page import run_sections
from eval_pipeline.viewer._theme import new_nonce, page


class NoResults(LookupError):
    """The store has no graded run for the day asked."""


def render_html_export(
    layout: StateFolder, day: date | None = None, *, models: list[str] | None = None
) -> str:
    """The day's results as one HTML document (default: the latest day with results).

    Args:
        layout: the store to read.
        day: the day to export; None takes the latest graded day.
        models: only these models; None takes every model graded that day.
    """
    # A damaged store file is set aside and the day read again without it.
    return with_recovery(layout, lambda: _render(layout, day, models))


def _render(layout: StateFolder, day: date | None, models: list[str] | None) -> str:
    reader = StoreReader(layout)
    try:
        with reader.cursor() as con:
            days = data.days(con)
            day = day or (days[0] if days else None)
            if day is None:
                raise NoResults("no graded results yet; run `eval-pipeline test` first")
            on_day = data.models_on(con, day)
            chosen = [m for m in on_day if models is None or m in models]
            if not chosen:
                raise NoResults(f"no graded results on {day.isoformat()} for the models asked")
            names = data.case_order(con, day)
            older = [d for d in days if d < day]
            previous = (older[0], data.pass_rate_on(con, older[0], chosen)) if older else None
            look = data.model_look(con)
            document = data.day_document(con, reader, day, chosen, names)
            not_passed = [data.result_run_id(r) for r in document.results if not r.passed]
            runs = [data.run_detail(con, reader, ident) for ident in not_passed]
    finally:
        reader.close()
    links = Links(live=False, anchors=set(not_passed))
    failures = [
        el(
            "div",
            el(
                "h3",
                badge(run["status"]),
                el("span", run["name"], class_="mono"),
                el("span", f"{look.name(run['model'])} · attempt {run['attempt']}", class_="muted"),
                class_="run-title",
            ),
            run_sections(run),
            id=f"run-{run['run_id']}",
        )
        for run in runs
        if run is not None
    ]
    body = join(
        overview_body(
            document,
            day=day,
            days=days,
            model=None,
            previous=previous,
            look=look,
            links=links,
        ),
        section(
            f"Runs that did not pass ({len(failures)})",
            failures or el("p", "Every run passed.", class_="muted"),
            id_="failures",
        ),
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return page(
        f"Results {day.isoformat()}",
        body,
        nonce=new_nonce(),
        live=False,
        note=f"exported {stamp} · {day.isoformat()}",
    )

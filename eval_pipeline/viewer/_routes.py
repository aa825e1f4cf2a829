"""Requests to responses: the viewer's routes, their parameters and their errors, without HTTP plumbing."""

from __future__ import annotations

import re
import sys
import traceback
import urllib.parse
from dataclasses import dataclass, field
from datetime import date, timedelta

from eval_pipeline.store import StateFolder, with_recovery
from eval_pipeline.viewer import _data as data
from eval_pipeline.viewer._html import Markup, el, join
from eval_pipeline.viewer._insights import WINDOWS, labels_body, trends_body
from eval_pipeline.viewer._labels import LabelError, add_label, agreement_rows, parse_label_form
from eval_pipeline.viewer._pages import Links, empty_state, link, overview_body
from eval_pipeline.viewer._reader import StoreReader
from eval_pipeline.viewer._run_page import run_body
from eval_pipeline.viewer._runs_page import runs_body
from eval_pipeline.viewer._theme import content_security_policy, new_nonce, page
from eval_pipeline.viewer._usage_page import read_recommendations, recommendations_body

MAX_PARAM = 300
STATUSES = ("passed", "failed", "error")
RUN_ROUTE = re.compile(r"/run/([0-9a-f]{16})")
LABEL_ROUTE = re.compile(r"/run/([0-9a-f]{16})/label")
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass
class Request:
    method: str
    target: str  # the request line's path and query, as sent
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class BadRequest(ValueError):
    """A parameter the viewer cannot use (400)."""


class NotFound(LookupError):
    """No such page or run (404)."""


class Forbidden(PermissionError):
    """A form posted from another origin (403)."""


def html(status: int, title: str, body: Markup, *, active: str = "") -> Response:
    nonce = new_nonce()
    text = page(title, body, active=active, nonce=nonce)
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Content-Security-Policy": content_security_policy(nonce),
    }
    return Response(status, text.encode("utf-8"), headers)


def message_page(status: int, title: str, text: str) -> Response:
    body = join(
        el(
            "div",
            el("h2", f"{status} · {title}"),
            el("p", text),
            el("p", link("/", "Back to the overview")),
            class_="empty-state panel",
        )
    )
    return html(status, title, body)


def _params(query: str) -> dict[str, str]:
    try:
        pairs = urllib.parse.parse_qsl(query, max_num_fields=30, strict_parsing=False)
    except ValueError as error:
        raise BadRequest("too many parameters") from error
    params: dict[str, str] = {}
    for key, value in pairs:
        if len(value) > MAX_PARAM:
            raise BadRequest(f"the parameter {key!r} is too long")
        params.setdefault(key, value.strip())
    return params


def _day(value: str | None, name: str = "date") -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"{name} must be a day as YYYY-MM-DD, got {value!r}") from None


class ViewerApp:
    """Routes: `/` overview, `/runs`, `/run/<id>`, POST `/run/<id>/label`, `/trends`, `/labels`,
    `/recommendations`."""

    def __init__(self, layout: StateFolder) -> None:
        self.layout = layout
        self.reader = StoreReader(layout)

    def handle(self, request: Request) -> Response:
        split = urllib.parse.urlsplit(request.target)
        path = split.path
        try:
            params = _params(split.query)
            if request.method == "POST":  # a label is written once, never retried
                response = self._route(request, path, params)
            else:  # a damaged store file is set aside and the page read again without it
                response = with_recovery(self.layout, lambda: self._route(request, path, params))
        except BadRequest as error:
            response = message_page(400, "Bad request", str(error))
        except NotFound as error:
            response = message_page(404, "Not found", str(error) or "There is no such page.")
        except Forbidden as error:
            response = message_page(403, "Forbidden", str(error))
        except Exception:  # never a traceback page: the details go to the server's log
            traceback.print_exc(file=sys.stderr)
            response = message_page(
                500, "Error", "The results could not be read; see the server log."
            )
        response.headers = {**SECURITY_HEADERS, **response.headers}
        return response

    def _route(self, request: Request, path: str, params: dict[str, str]) -> Response:
        method = request.method
        if method == "POST":
            match = LABEL_ROUTE.fullmatch(path)
            if not match:
                raise NotFound("Nothing to post here.")
            return self.post_label(request, match.group(1))
        if path == "/favicon.ico":
            return Response(204)
        if path in ("/", "/index.html"):
            return self.overview(params)
        if path == "/runs":
            return self.runs(params)
        if path == "/trends":
            return self.trends(params)
        if path == "/labels":
            return self.labels()
        if path == "/recommendations":
            return self.recommendations()
        match = RUN_ROUTE.fullmatch(path)
        if match:
            return self.run(match.group(1), params)
        raise NotFound("There is no such page.")

    # ---- pages ------------------------------------------------------------------------------

    def overview(self, params: dict[str, str]) -> Response:
        wanted, model = _day(params.get("date")), params.get("model") or None
        with self.reader.cursor() as con:
            days = data.days(con)
            if not days:
                return html(200, "Overview", _no_results(), active="overview")
            day = wanted or days[0]
            models = data.models_on(con, day)
            if model:
                models = [m for m in models if m == model]
            names = data.case_order(con, day)
            older = [d for d in days if d < day]
            previous = (
                (older[0], data.pass_rate_on(con, older[0], models)) if older and models else None
            )
            look = data.model_look(con)
            document = data.day_document(con, self.reader, day, models, names) if models else None
        if document is None:
            what = f"for {model} " if model else ""
            body = empty_state(
                f"No results {what}on {day.isoformat()}",
                join(
                    link(f"/?date={days[0].isoformat()}", "See the latest day"),
                    f" ({days[0].isoformat()}).",
                ),
            )
            return html(200, "Overview", body, active="overview")
        body = overview_body(
            document,
            day=day,
            days=days,
            model=model,
            previous=previous,
            look=look,
            links=Links(),
        )
        return html(200, f"Overview {day.isoformat()}", body, active="overview")

    def runs(self, params: dict[str, str]) -> Response:
        status = params.get("status") or None
        if status and status not in STATUSES:
            raise BadRequest(f"status must be one of {', '.join(STATUSES)}")
        limit = 2000
        with self.reader.cursor() as con:
            days = data.days(con)
            chosen = params.get("date") or (days[0].isoformat() if days else "all")
            day = None if chosen == "all" else _day(chosen)
            filters = {
                "date": chosen,
                "model": params.get("model") or None,
                "status": status,
                "tag": params.get("tag") or None,
                "q": params.get("q") or None,
            }
            rows = data.runs(
                con,
                day=day,
                model=filters["model"],
                status=status,
                tag=filters["tag"],
                text=filters["q"],
                limit=limit,
            )
            models, tags = data.all_models(con), data.all_tags(con)
            look = data.model_look(con)
        body = runs_body(
            rows, filters=filters, days=days, models=models, tags=tags, limit=limit, look=look
        )
        return html(200, "Runs", body, active="runs")

    def run(self, ident: str, params: dict[str, str]) -> Response:
        with self.reader.cursor() as con:
            run = data.run_detail(con, self.reader, ident)
            if run is None:
                raise NotFound("There is no run with this id in the store.")
            previous, following = data.neighbours(con, run)
            history = data.case_history(con, run["name"], run["model"])
            labels = data.run_labels(con, run)
            look = data.model_look(con)
        notice = "Label saved." if params.get("labelled") == "1" else None
        body = run_body(
            run,
            links=Links(),
            previous=previous,
            following=following,
            history=history,
            labels=labels,
            look=look,
            notice=notice,
        )
        return html(200, f"{run['name']} · {look.name(run['model'])}", body, active="runs")

    def trends(self, params: dict[str, str]) -> Response:
        try:
            window = int(params.get("days") or 30)
        except ValueError:
            raise BadRequest("days must be a whole number") from None
        if window not in WINDOWS:
            raise BadRequest(f"days must be one of {', '.join(map(str, WINDOWS))}")
        with self.reader.cursor() as con:
            days = data.days(con)
            if not days:
                return html(200, "Trends", _no_results(), active="trends")
            end = _day(params.get("end"), "end") or days[0]
            start = end - timedelta(days=window - 1)
            points = data.trend_points(con, start, end)
            changes = data.day_changes(con, start, end)
            flaky = data.flaky(con, start, end)
            look = data.model_look(con)
        body = trends_body(points, changes, flaky, start=start, end=end, window=window, look=look)
        return html(200, "Trends", body, active="trends")

    def labels(self) -> Response:
        with self.reader.cursor() as con:
            labelled = data.labelled_runs(con, self.reader)
            waiting = data.unlabelled_judged(con)
            total = data.label_count(con)
            look = data.model_look(con)
        body = labels_body(
            agreement_rows(labelled), labelled, waiting, total_labels=total, look=look
        )
        return html(200, "Labels", body, active="labels")

    def recommendations(self) -> Response:
        with self.reader.cursor() as con:
            ranked, conversations = read_recommendations(con)
        body = recommendations_body(ranked, conversations)
        return html(200, "Recommendations", body, active="recommendations")

    def post_label(self, request: Request, ident: str) -> Response:
        _check_same_origin(request)
        if not request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            raise BadRequest("send the label form as application/x-www-form-urlencoded")
        try:
            form = urllib.parse.parse_qs(
                request.body.decode("utf-8"), max_num_fields=10, keep_blank_values=True
            )
        except (UnicodeDecodeError, ValueError):
            raise BadRequest("the form could not be read") from None
        try:
            passed, note, author = parse_label_form(form)
        except LabelError as error:
            raise BadRequest(str(error)) from None
        with self.reader.cursor() as con:
            run = data.run_detail(con, self.reader, ident)
        if run is None:
            raise NotFound("There is no run with this id in the store.")
        add_label(self.layout, run, passed=passed, note=note, author=author)
        return Response(303, headers={"Location": f"/run/{ident}?labelled=1#label"})


def _check_same_origin(request: Request) -> None:
    """A form posted by a page of this server, not by another site in the same browser."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is not None:
        if origin != f"http://{host}":
            raise Forbidden("the form was not sent from this page (origin mismatch)")
        return
    referer = request.headers.get("referer", "")
    if not referer.startswith(f"http://{host}/"):
        raise Forbidden("the form was not sent from this page (no origin)")


def _no_results() -> Markup:
    return empty_state(
        "No results yet",
        join(
            "Run ",
            el("code", "eval-pipeline test"),
            " to evaluate the suite; results show up here.",
        ),
    )


def host_allowed(host_header: str, bound: str) -> bool:
    """On a loopback address only loopback host names are answered, so a web page elsewhere
    cannot read results by pointing its own domain at 127.0.0.1 (DNS rebinding)."""
    if bound not in ("127.0.0.1", "localhost", "::1"):
        return True
    name = (
        host_header.rsplit(":", 1)[0]
        if not host_header.startswith("[")
        else host_header.split("]")[0] + "]"
    )
    return name in ("127.0.0.1", "localhost", "[::1]")

"""The viewer in a real browser: Debian's Chromium driven by Playwright (never a downloaded one).

Skipped only when /usr/bin/chromium or the playwright package is missing; CI installs both.
Every test takes its screenshots; with EVAL_SAVE_SCREENSHOTS=1 they replace the ones the
README shows (docs/screenshots/), otherwise they go to a temporary folder.
"""

from __future__ import annotations

import os
import re
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.viewer import run_id
from eval_pipeline_tests.viewer.history import CLAUDE, DAY2, DAY3, GPT, HOSTILE, REUSED

CHROMIUM = Path("/usr/bin/chromium")
try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - CI installs it with the dev extras
    sync_playwright = None

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Debian's chromium is not installed (apt-get install chromium)",
    ),
    pytest.mark.skipif(
        sync_playwright is None,
        reason="the playwright package is not installed (pip install -e '.[dev]')",
    ),
]

SCREENSHOTS = (
    Path(__file__).resolve().parents[2] / "docs" / "screenshots"
    if os.environ.get("EVAL_SAVE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / "eval_pipeline_screenshots"
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOP_FAIL = run_id("top_customers", CLAUDE, DAY3, 0)
REFUND_FAIL = run_id("refund_rate", CLAUDE, DAY3, 0)  # its diff holds a DATE column
HOSTILE_RUN = run_id("markup_in_reply", GPT, DAY3, 0)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """A browser tab on the viewer that records dialogs and any request leaving the machine."""

    def __init__(self, browser: Browser, base: str) -> None:
        self.base = base
        self.context = browser.new_context(viewport={"width": 1360, "height": 900})
        self.dialogs: list[str] = []
        self.outside: list[str] = []
        self.context.route(re.compile(r"^(?!http://127\.0\.0\.1[:/]).*"), self._block)
        self.page: Page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.page.on("dialog", self._dialog)

    def _block(self, route) -> None:
        if route.request.url.startswith("data:"):
            route.continue_()
            return
        self.outside.append(route.request.url)
        route.abort()

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def go(self, path: str) -> Page:
        self.page.goto(self.base + path)
        return self.page


@pytest.fixture
def visit(browser, server) -> Iterator[Visit]:
    tab = Visit(browser, server.url)
    yield tab
    tab.context.close()
    assert tab.outside == [], "the page asked for something beyond this machine"
    assert tab.dialogs == [], "a script from the data ran"


def shoot(page: Page, name: str, *, height: int | None = None, width: int = 1360) -> None:
    """The whole page, or its top `height` pixels (`width` wide)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if height:
        page.set_viewport_size({"width": width, "height": height})
    page.screenshot(path=str(SCREENSHOTS / name), full_page=height is None)


def test_overview_loads_and_clicking_a_model_filters(visit):
    page = visit.go("/")
    assert page.title().startswith("Overview 2026-06-03")
    assert page.locator(".card").count() == 6
    assert page.locator("#grid tbody tr").count() == 6
    shoot(page, "overview.png")
    page.locator(f'#models tr[data-model="{GPT}"] td').nth(2).click()  # the row, not the link
    page.wait_for_url(re.compile(r"model=openai"))
    headers = page.locator("#grid thead th").all_inner_texts()
    assert any(GPT in h for h in headers) and not any(CLAUDE in h for h in headers)
    assert page.locator(".filter-pill").inner_text().startswith(f"model: {GPT}")


def test_runs_table_filters_and_sorts(visit):
    page = visit.go("/runs?date=all")
    page.select_option("select[name=model]", CLAUDE)  # submits the filter form on change
    page.wait_for_url(re.compile("model=" + re.escape(urllib.parse.quote_plus(CLAUDE))))
    models = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.model)")
    assert len(models) == 19 and set(models) == {CLAUDE}  # one test tried twice on a day
    page.fill("input[name=q]", "top_customers")  # filters as you type
    assert page.locator("#runs tbody tr:not([hidden])").count() == 3
    assert page.locator("#row-count").inner_text() == "3"
    page.locator("#runs th", has_text="Tokens").click()
    tokens = page.locator("#runs tbody tr:not([hidden]) td:nth-child(8)").all_inner_texts()
    values = [int(t.replace(",", "")) for t in tokens]
    assert values == sorted(values)


def test_a_failed_run_shows_its_diff_with_the_differing_cell_highlighted(visit):
    page = visit.go("/")
    page.locator(f'#grid a[href="/run/{TOP_FAIL}"]').click()
    page.wait_for_url(re.compile(TOP_FAIL))
    diff_panel = page.locator(f"#r{TOP_FAIL}-panel-diff")
    assert diff_panel.is_visible()
    assert diff_panel.locator("td.cell-diff").all_inner_texts() == ["310.0", "300.0"]
    page.get_by_role("tab", name=re.compile("Actual")).click()
    actual = page.locator(f"#r{TOP_FAIL}-panel-actual")
    assert actual.is_visible() and not diff_panel.is_visible()
    marked = actual.locator("td.cell-diff")
    assert marked.all_inner_texts() == ["310.0"]
    color = marked.evaluate("td => getComputedStyle(td).backgroundColor")
    assert color == "rgb(253, 226, 225)"  # the highlight, not the plain row
    assert (
        "SELECT\n  c.customer_name AS customer," in page.locator("#reference-sql pre").inner_text()
    )
    page.get_by_role("tab", name=re.compile("Diff")).click()
    shoot(page, "run-detail.png", height=1400)


def test_a_label_is_saved_and_found_after_a_reload(visit):
    page = visit.go(f"/run/{TOP_FAIL}")
    page.check("input[name=verdict][value=failed]")
    page.fill("textarea[name=note]", "Globex revenue counts a refunded order twice")
    page.fill("input[name=author]", "Ana")
    page.get_by_role("button", name="Save label").click()
    page.wait_for_url(re.compile("labelled=1"))
    assert page.get_by_role("status").inner_text() == "Label saved."
    page.reload()
    history = page.locator("#label-history")
    assert "Globex revenue counts a refunded order twice" in history.inner_text()
    assert "human: failed" in history.inner_text() and "Ana" in history.inner_text()
    labels = visit.go("/labels")
    overall = labels.locator('#agreement tr[data-grader="overall"] td').all_inner_texts()
    assert overall[:4] == ["overall", "overall", "1", "100.0%"]


def test_a_hostile_reply_is_shown_as_text_and_runs_nothing(visit):
    page = visit.go(f"/run/{HOSTILE_RUN}")
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)  # time for an onerror handler to fire, were there one
    assert page.locator("#final-reply").inner_text() == HOSTILE
    assert page.locator("img").count() == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    # the visit fixture asserts no dialog opened


def test_trends_draw_the_pass_rate_chart_and_list_changes_apart_from_flaky_tests(visit):
    page = visit.go("/trends")
    assert page.locator("#pass-rate-chart svg polyline").count() == 2
    assert page.locator("#cost-chart svg rect").count() == 6
    # total_revenue by gpt passed, failed, passed: a regression and an improvement, not flaky
    flips = page.locator("#changes tbody tr", has_text="total_revenue")
    assert sorted(flips.evaluate_all("rows => rows.map(r => r.dataset.change)")) == [
        "improved",
        "regressed",
    ]
    assert "total_revenue" not in page.locator("#flaky").inner_text()
    flaky = page.locator("#flaky tbody tr")
    assert flaky.count() == 1 and "revenue_by_month" in flaky.inner_text()
    assert flaky.locator(".sq").count() == 2  # the two attempts of the day they disagreed
    shoot(page, "trends.png")


def test_the_runs_table_shows_every_column_at_1400_px(visit):
    """A long message takes what width is left and is cut there: Cost, Time and Tools stay
    in view without scrolling the table sideways."""
    visit.page.set_viewport_size({"width": 1400, "height": 900})
    page = visit.go("/runs?date=all")
    wrap = page.locator("#runs").locator("xpath=..")
    box = wrap.bounding_box()
    for header in ("Cost", "Time", "Tools"):
        cell = page.locator("#runs thead th", has_text=header).bounding_box()
        assert cell["x"] + cell["width"] <= box["x"] + box["width"] + 0.5, header
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth")
    shoot(page, "runs.png", height=900, width=1400)


def test_a_date_in_a_diff_shows_as_a_date(visit):
    page = visit.go(f"/run/{REFUND_FAIL}")
    diff = page.locator(f"#r{REFUND_FAIL}-panel-diff")
    assert diff.is_visible()
    months = diff.locator("tbody td:nth-child(3)").all_inner_texts()
    assert months == ["2025-01-01", "2025-01-01"]  # stored as 2025-01-01T00:00:00.000Z
    assert "T00:00:00" not in page.locator("main").inner_text()


def test_a_reused_run_says_its_start_was_an_earlier_invocations(visit):
    name, model, day = REUSED
    page = visit.go(f"/run/{run_id(name, model, day, 0)}")
    numbers = page.locator("#numbers").inner_text()
    assert "yes: an earlier invocation made this run" in numbers
    assert f"{day.isoformat()} 06:00:00 UTC (by the earlier invocation)" in numbers
    fresh = visit.go(f"/run/{run_id(name, model, DAY2, 0)}").locator("#numbers").inner_text()
    assert "Reused" not in fresh and f"{DAY2.isoformat()} 06:00:00 UTC" in fresh

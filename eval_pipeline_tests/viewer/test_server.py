"""The results viewer over HTTP: every route, filters, labels, bad input and path traversal."""

from __future__ import annotations

import re
import sys
import urllib.parse
from pathlib import Path

import pytest

from eval_pipeline.cli import build_parser, main
from eval_pipeline.store import StateFolder, ensure_database, query
from eval_pipeline.viewer import make_server, render_html_export, run_id
from eval_pipeline_tests.viewer.conftest import fetch, start
from eval_pipeline_tests.viewer.history import CLAUDE, DAY1, DAY2, DAY3, GPT, build_store

TOP_FAIL = run_id("top_customers", CLAUDE, DAY3, 0)
HOSTILE_RUN = run_id("markup_in_reply", GPT, DAY3, 0)
POLITE_FAIL = run_id("polite_clarification", CLAUDE, DAY2, 0)
ERROR_RUN = run_id("markup_in_reply", CLAUDE, DAY3, 0)
ESCAPED_HOSTILE = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"


def rows_of(text: str) -> list[tuple[str, str]]:
    """(status, model) of each run row in a runs table."""
    return re.findall(r'<tr data-status="(\w+)" data-model="([^"]+)"', text)


@pytest.fixture
def fresh(tmp_path):
    """A store and server of their own, for tests that write labels."""
    layout = build_store(tmp_path / ".eval")
    server, thread = start(layout)
    yield layout, server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def post_label(server, ident: str, fields: dict[str, str], **headers: str):
    host, port = server.server_address[:2]
    sent = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Origin": f"http://{host}:{port}",
        **headers,
    }
    return fetch(
        server,
        f"/run/{ident}/label",
        method="POST",
        body=urllib.parse.urlencode(fields),
        headers={k: v for k, v in sent.items() if v},
    )


def test_overview_shows_the_latest_day_cards_models_and_grid(server):
    reply = fetch(server, "/")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    text = reply.text
    assert "2026-06-03 · 2 model(s) · 6 test(s)" in text
    assert "66.7%" in text  # 8 of 12 runs passed on the latest day
    assert "Performance by model" in text and GPT in text and CLAUDE in text
    assert f'href="/run/{TOP_FAIL}"' in text  # the grid cell links to its run
    # only our own script runs: the CSP names the nonce our one script tag carries
    nonce = re.search(r"script-src 'nonce-([^']+)'", reply.headers["content-security-policy"])
    assert nonce and text.count("<script") == 1 and f'nonce="{nonce.group(1)}"' in text
    assert reply.headers["x-frame-options"] == "DENY"


def test_overview_of_an_earlier_day_filtered_to_one_model(server):
    reply = fetch(server, f"/?date={DAY2}&model={urllib.parse.quote(GPT)}")
    assert reply.status == 200
    assert "2026-06-02" in reply.text and "66.7%" in reply.text  # gpt passed 4 of 6
    assert CLAUDE not in reply.text
    assert f"model: {GPT}" in reply.text  # the filter is shown, with a way to clear it


def test_overview_bad_date_is_400_and_an_empty_day_says_so(server):
    bad = fetch(server, "/?date=yesterday")
    assert bad.status == 400 and "YYYY-MM-DD" in bad.text and "Traceback" not in bad.text
    empty = fetch(server, "/?date=2020-01-01")
    assert empty.status == 200 and "No results on 2020-01-01" in empty.text


def test_runs_table_filters_by_day_model_status_tag_and_text(server):
    assert len(rows_of(fetch(server, "/runs").text)) == 12  # the latest day by default
    assert len(rows_of(fetch(server, "/runs?date=all").text)) == 37  # one test tried twice
    failed_claude = rows_of(
        fetch(server, f"/runs?date=all&status=failed&model={urllib.parse.quote(CLAUDE)}").text
    )
    assert len(failed_claude) == 5 and set(failed_claude) == {("failed", CLAUDE)}
    assert len(rows_of(fetch(server, "/runs?date=all&tag=security").text)) == 6
    found = fetch(server, "/runs?date=all&q=310.0").text
    assert rows_of(found) == [("failed", CLAUDE)] and "top_customers" in found
    assert fetch(server, "/runs?status=bogus").status == 400
    assert fetch(server, "/runs?date=06/03/2026").status == 400


def test_run_detail_shows_diff_sql_tool_calls_and_neighbours(server):
    reply = fetch(server, f"/run/{TOP_FAIL}")
    assert reply.status == 200
    text = reply.text
    # the differing cells are highlighted in Diff, Actual and Expected; the matching ones not
    assert text.count('class="cell-diff">310.0</td>') == 2
    assert text.count('class="cell-diff">300.0</td>') == 2
    assert 'class="cell-diff">Globex' not in text
    assert 'role="tab"' in text and "Actual (3)" in text and "Expected (3)" in text
    # reference SQL and the agent's execute_sql, pretty-printed over several lines
    assert "SELECT\n  c.customer_name AS customer," in text
    assert text.count("ORDER BY\n  revenue DESC") == 2
    assert "&quot;limit&quot;: 100" in text  # other arguments listed separately
    assert re.search(
        r'id="prev-run" href="/run/[0-9a-f]{16}"|href="/run/[0-9a-f]{16}"[^>]*id="prev-run"', text
    )
    assert "3,884" in text and "$0.0157" in text  # tokens and cost


def test_run_detail_shows_judge_reasoning_and_errors(server):
    judged = fetch(server, f"/run/{POLITE_FAIL}").text
    assert "asks_for_period" in judged
    assert "The reply picks a period itself instead of asking which one is meant." in judged
    errored = fetch(server, f"/run/{ERROR_RUN}").text
    assert 'id="run-error"' in errored and "provider returned 529 (overloaded)" in errored


def test_hostile_reply_is_shown_as_text_everywhere(server):
    for path in (f"/run/{HOSTILE_RUN}", "/runs?date=all&q=markup"):
        text = fetch(server, path).text
        assert "<script>alert" not in text and "<img src=x" not in text
    assert ESCAPED_HOSTILE in fetch(server, f"/run/{HOSTILE_RUN}").text


def test_a_label_posted_is_stored_with_history_and_counted_in_agreement(fresh):
    layout, server = fresh
    first = post_label(server, TOP_FAIL, {"verdict": "passed", "note": "late refund <b>ok</b>"})
    assert first.status == 303
    assert first.headers["location"] == f"/run/{TOP_FAIL}?labelled=1#label"
    page = fetch(server, f"/run/{TOP_FAIL}?labelled=1").text
    assert "Label saved." in page and "late refund &lt;b&gt;ok&lt;/b&gt;" in page
    assert (
        post_label(
            server, TOP_FAIL, {"verdict": "failed", "note": "no: wrong", "author": "Ana"}
        ).status
        == 303
    )
    assert post_label(server, POLITE_FAIL, {"verdict": "failed"}).status == 303
    history = query(layout, "SELECT name, passed FROM labels ORDER BY written_at")
    assert history.values.tolist() == [
        ["top_customers", True],
        ["top_customers", False],
        ["polite_clarification", False],
    ]
    latest = query(
        layout, "SELECT name, passed, coalesce(author, '') FROM labels_latest ORDER BY name"
    )
    assert latest.values.tolist() == [
        ["polite_clarification", False, ""],
        ["top_customers", False, "Ana"],
    ]
    page = fetch(server, f"/run/{TOP_FAIL}").text
    assert "no: wrong" in page and "late refund" in page  # every label, newest first
    labels = fetch(server, "/labels").text
    overall = re.search(r'<tr data-grader="overall">(.*?)</tr>', labels, re.S).group(1)
    assert re.findall(r'<td[^>]*class="num"[^>]*>([^<]*)</td>', overall)[:2] == ["2", "100.0%"]
    evaluator = re.search(r'<tr data-grader="asks_for_period">(.*?)</tr>', labels, re.S).group(1)
    assert ">1<" in evaluator and "100.0%" in evaluator


def test_a_label_form_is_checked_and_its_note_trimmed(fresh):
    layout, server = fresh
    for bad in ({"verdict": "yes"}, {}, {"verdict": "passed", "author": "x" * 200}):
        assert post_label(server, TOP_FAIL, bad).status == 400, bad
    assert post_label(server, TOP_FAIL, {"verdict": "failed", "note": "  why  "}).status == 303
    stored = query(layout, "SELECT passed, note, coalesce(author, '') FROM labels")
    assert stored.values.tolist() == [[False, "why", ""]]


def test_every_label_is_kept_and_the_newest_of_each_run_is_its_label(fresh):
    layout, server = fresh
    for ident, verdict, note in (
        (TOP_FAIL, "passed", "first"),
        (TOP_FAIL, "failed", "second thoughts"),
        (POLITE_FAIL, "passed", ""),
    ):
        assert post_label(server, ident, {"verdict": verdict, "note": note}).status == 303
    assert query(layout, "SELECT count(*) AS n FROM labels").n[0] == 3
    assert query(layout, "SELECT count(*) AS n FROM labels_history").n[0] == 3
    latest = query(
        layout, "SELECT name, passed, coalesce(note, '-') FROM labels_latest ORDER BY name"
    )
    assert latest.values.tolist() == [
        ["polite_clarification", True, "-"],
        ["top_customers", False, "second thoughts"],
    ]
    assert len(list(layout.table_dir("labels").glob("*.parquet"))) == 3 + 1  # + the schema file


def test_label_posts_that_are_refused(fresh):
    layout, server = fresh
    host, port = server.server_address[:2]
    cases = [
        (post_label(server, TOP_FAIL, {"verdict": "passed"}, Origin="http://evil.example"), 403),
        (post_label(server, TOP_FAIL, {"verdict": "passed"}, Origin=""), 403),
        (post_label(server, TOP_FAIL, {"verdict": "maybe"}), 400),
        (post_label(server, TOP_FAIL, {"verdict": "passed", "note": "x" * 5000}), 400),
        (
            post_label(server, TOP_FAIL, {"verdict": "passed"}, **{"Content-Type": "text/plain"}),
            400,
        ),
        (post_label(server, "0123456789abcdef", {"verdict": "passed"}), 404),
        (post_label(server, "..%2f..%2fetc", {"verdict": "passed"}), 404),
    ]
    too_big = fetch(
        server,
        f"/run/{TOP_FAIL}/label",
        method="POST",
        body="verdict=passed&note=" + "x" * 40_000,
        headers={
            "Origin": f"http://{host}:{port}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    cases.append((too_big, 400))
    cases.append((fetch(server, "/runs", method="POST", body=""), 404))
    for reply, status in cases:
        assert reply.status == status, reply.text[:300]
        assert "Traceback" not in reply.text
    referer_ok = post_label(
        server, TOP_FAIL, {"verdict": "passed"}, Origin="", Referer=f"http://{host}:{port}/run/x"
    )
    assert referer_ok.status == 303
    assert query(layout, "SELECT count(*) AS n FROM labels").n[0] == 1


@pytest.fixture
def opened_paths():
    """Every file the process opens while the fixture is active."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and args and isinstance(args[0], str | bytes):
            seen.append(str(args[0]))

    sys.addaudithook(hook)  # audit hooks cannot be removed; this one goes quiet instead
    yield seen
    active[0] = False


@pytest.mark.parametrize(
    "path",
    [
        "/nope",
        "/run/..%2f..%2fetc%2fpasswd",
        "/run/../../etc/passwd",
        "/../../etc/passwd",
        "/run/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fetc%2fpasswd",
        "/results.duckdb",
        "/.eval/store/grades/_schema.parquet",
        "/run/0123456789abcdef",
        "/run/ZZZ",
        "/run/" + "a" * 16 + "/",
    ],
)
def test_bad_urls_and_traversal_give_404_and_read_nothing(server, opened_paths, path):
    reply = fetch(server, path)
    assert reply.status == 404
    assert "root:" not in reply.text and "Traceback" not in reply.text
    assert "404" in reply.text and "Back to the overview" in reply.text
    assert not [p for p in opened_paths if "passwd" in p or p.endswith(".parquet")]


def test_binds_127_0_0_1_by_default_and_refuses_foreign_host_names(layout):
    server = make_server(layout, port=0, quiet=True)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()
    args = build_parser().parse_args(["server"])
    assert (args.host, args.port, args.no_open) == ("127.0.0.1", 8765, False)


def test_foreign_host_header_head_and_unknown_methods(server):
    assert fetch(server, "/", headers={"Host": "evil.example"}).status == 400
    assert (
        fetch(server, "/", headers={"Host": f"localhost:{server.server_address[1]}"}).status == 200
    )
    head = fetch(server, "/", method="HEAD")
    assert head.status == 200 and head.text == ""
    other = fetch(server, "/", method="DELETE")
    assert other.status == 501 and "Traceback" not in other.text


def _table(text: str, ident: str) -> str:
    return re.search(rf'<table id="{ident}".*?</table>', text, re.S).group(0)


def _changes(text: str) -> set[tuple[str, str, str, str]]:
    """(day, test, model, change) of each row of the trends page's changes table."""
    rows = re.findall(r'<tr data-change="(\w+)">(.*?)</tr>', _table(text, "changes"), re.S)
    found = set()
    for change, row in rows:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        found.add((cells[0], cells[1], cells[2], change))
    return found


def test_trends_chart_day_to_day_changes_and_flaky_tests(server):
    text = fetch(server, "/trends").text
    assert text.count("<polyline") == 2 and "Cost per day" in text
    day2, day3 = DAY2.isoformat(), DAY3.isoformat()
    # total_revenue by gpt passed, failed, passed: two changes, not a flaky test
    assert _changes(text) == {
        (day3, "top_customers", CLAUDE, "regressed"),
        # markup_in_reply by claude is an error on DAY3: no verdict, so no regression
        (day3, "total_revenue", GPT, "improved"),
        (day3, "polite_clarification", CLAUDE, "improved"),
        (day2, "total_revenue", GPT, "regressed"),
        (day2, "polite_clarification", CLAUDE, "regressed"),
        (day2, "refund_rate", CLAUDE, "regressed"),
        (day2, "revenue_by_month", CLAUDE, "improved"),  # all passed after a mixed day
    }
    assert "4 regressed, 3 improved" in text
    # flaky: attempts of one day that disagree (the flaky_cases mart's rule)
    flaky = _table(text, "flaky")
    assert "revenue_by_month" in flaky and "1 of 3" in flaky
    assert "total_revenue" not in flaky and "polite_clarification" not in flaky
    earlier = fetch(server, f"/trends?days=7&end={DAY2}").text
    assert {(d, n, c) for d, n, _, c in _changes(earlier)} == {
        (day2, "total_revenue", "regressed"),
        (day2, "polite_clarification", "regressed"),
        (day2, "refund_rate", "regressed"),
        (day2, "revenue_by_month", "improved"),
    }
    assert fetch(server, "/trends?days=3").status == 400
    assert fetch(server, "/trends?days=x").status == 400
    assert fetch(server, "/trends?end=nope").status == 400


def test_labels_page_before_any_label(server):
    text = fetch(server, "/labels").text
    assert "No labelled run yet" in text
    assert "Judged runs waiting for a label" in text and "polite_clarification" in text


def test_an_empty_store_says_how_to_get_results(tmp_path):
    layout = StateFolder(tmp_path / ".eval")
    ensure_database(layout)
    server, thread = start(layout)
    try:
        for path in ("/", "/trends"):
            reply = fetch(server, path)
            assert reply.status == 200 and "No results yet" in reply.text
        assert fetch(server, "/runs").status == 200 and fetch(server, "/labels").status == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_html_export_is_one_self_contained_page(layout):
    text = render_html_export(layout)
    assert text.startswith("<!doctype html>")
    assert "Runs that did not pass (4)" in text
    assert f'id="run-{TOP_FAIL}"' in text and f'href="#run-{TOP_FAIL}"' in text
    assert 'class="cell-diff">310.0</td>' in text
    assert ESCAPED_HOSTILE in text and "<script>alert" not in text
    assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing loaded from elsewhere
    assert 'http-equiv="Content-Security-Policy"' in text
    assert "/run/" not in text  # no link to a server that is not there
    assert "2026-06-01" in render_html_export(layout, DAY1)


def test_export_command_writes_html(tmp_path):
    root = tmp_path / "suite"
    (root / "cases").mkdir(parents=True)
    (root / "eval_config.yaml").write_text("test:\n  models: [replay:demo]\n")
    (root / "cases" / "total_revenue.yml").write_text(
        "prompt: Total revenue?\nsql: SELECT 1 AS x\n"
    )
    build_store(root / ".eval")
    out = tmp_path / "day.html"
    code = main(
        ["export", "--suite", str(root), "--format", "html", "--date", str(DAY2), "-o", str(out)]
    )
    assert code == 0
    text = out.read_text(encoding="utf-8")
    assert "2026-06-02" in text and "Runs that did not pass (4)" in text
    bad = main(["export", "--suite", str(root), "--format", "html", "--model", "nobody"])
    assert bad == 2
    assert Path(out).stat().st_size < 400_000


def test_a_damaged_file_is_set_aside_and_every_page_still_answers(fresh, caplog):
    layout, server = fresh
    # A grades file of an earlier day (not the latest day's) overwritten with garbage.
    damaged = sorted((layout.tables_dir / "grades" / f"date={DAY1}").rglob("[0-9]*.parquet"))[0]
    damaged.write_bytes(b"\x00garbage" * 500)
    with caplog.at_level("WARNING", logger="eval_pipeline.store"):
        pages = {path: fetch(server, path) for path in ("/", "/runs", "/trends", "/labels")}
        again = fetch(server, "/runs")
    assert {path: reply.status for path, reply in pages.items()} == dict.fromkeys(pages, 200)
    assert again.status == 200
    assert GPT in pages["/"].text  # the latest day is whole
    warnings = [r.getMessage() for r in caplog.records if "damaged store file" in r.getMessage()]
    assert len(warnings) == 1 and f"partition date={DAY1}/" in warnings[0]  # reported once
    assert not damaged.exists()
    assert list(layout.quarantine_dir.rglob(damaged.name))


def raw_request(server, lines: list[str]) -> str:
    """Send a request exactly as written (fetch cannot repeat a header) and read the answer."""
    import socket

    with socket.create_connection(server.server_address[:2], timeout=10) as connection:
        connection.sendall(("\r\n".join([*lines, "", ""])).encode())
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received.decode("latin-1")


@pytest.mark.parametrize(
    "extra",
    [
        ["Host: evil.example"],
        ["Host: localhost"],
        ["Origin: http://{host}", "Origin: http://evil.example"],
    ],
)
def test_a_repeated_host_or_origin_header_is_refused(server, extra):
    host = f"127.0.0.1:{server.server_address[1]}"
    extra = [line.format(host=host) for line in extra]
    good = raw_request(server, ["GET / HTTP/1.1", f"Host: {host}", "Connection: close"])
    assert good.startswith("HTTP/1.1 200")
    answer = raw_request(server, ["GET / HTTP/1.1", f"Host: {host}", *extra, "Connection: close"])
    assert answer.startswith("HTTP/1.1 400"), answer[:200]
    assert "A header that must appear once repeats." in answer
    # the DNS-rebinding order too: the foreign name first, the loopback name last
    answer = raw_request(server, ["GET / HTTP/1.1", *extra, f"Host: {host}", "Connection: close"])
    assert answer.startswith("HTTP/1.1 400"), answer[:200]


def test_the_overview_says_whether_the_difference_is_real(server):
    text = fetch(server, "/").text
    compared = re.search(r'<table id="comparisons".*?</table>', text, re.S).group(0)
    assert GPT in compared and CLAUDE in compared and "a tie" in compared
    assert "differences under" in text or "too few answers differ" in text
    # the rate with its 95% interval: 5 of 6 runs, Wilson 43.6–97.0%
    assert '>83.3%<span class="muted" title="95% interval 43.6–97.0%"> ± 39.7</span>' in text


def test_the_trend_chart_draws_an_error_bar_per_point(server):
    text = fetch(server, "/trends").text
    assert text.count('<g class="ci">') == 6  # two models × three days
    assert "(95% CI " in text

"""The page shell: inline CSS, the little vanilla JS (sorting, filtering, tabs), the navigation."""

from __future__ import annotations

import secrets

from eval_pipeline.viewer._html import Child, Markup, el, join

CSS = """
:root {
  --bg: #f6f7f9; --panel: #fff; --border: #e3e6ea; --border-strong: #cfd4da;
  --text: #1d2330; --muted: #66707d; --faint: #98a1ad; --accent: #4f46e5; --accent-soft: #eef0ff;
  --pass: #15803d; --pass-bg: #e7f6ec; --fail: #c0262d; --fail-bg: #fdecec;
  --err: #b45309; --err-bg: #fdf3e1; --mono: "DejaVu Sans Mono", ui-monospace, SFMono-Regular, Menlo, monospace;
}
* { box-sizing: border-box; }
html { font-size: 14px; }
body { margin: 0; background: var(--bg); color: var(--text); line-height: 1.45;
  font-family: Inter, "Segoe UI", system-ui, -apple-system, "Liberation Sans", "DejaVu Sans", sans-serif; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
header.top { background: #fff; border-bottom: 1px solid var(--border); position: sticky; top: 0; z-index: 5; }
.top-inner { max-width: 1320px; margin: 0 auto; padding: 0 24px; display: flex; align-items: center; gap: 28px; height: 52px; }
.brand { display: flex; align-items: center; gap: 8px; font-weight: 650; color: var(--text); letter-spacing: -0.01em; }
.brand:hover { text-decoration: none; }
.brand .logo { width: 22px; height: 22px; border-radius: 6px; background: linear-gradient(135deg, #4f46e5, #0891b2);
  color: #fff; display: grid; place-items: center; font-size: 12px; font-weight: 700; }
.brand small { color: var(--muted); font-weight: 500; }
nav.tabs-nav { display: flex; gap: 4px; height: 100%; }
nav.tabs-nav a { display: flex; align-items: center; padding: 0 12px; color: var(--muted); font-weight: 550; border-bottom: 2px solid transparent; }
nav.tabs-nav a:hover { color: var(--text); text-decoration: none; }
nav.tabs-nav a.active { color: var(--text); border-bottom-color: var(--accent); }
.top-right { margin-left: auto; color: var(--faint); font-size: 12px; }
main { max-width: 1320px; margin: 0 auto; padding: 22px 24px 60px; }
.page-head { display: flex; align-items: flex-end; gap: 16px; margin-bottom: 18px; flex-wrap: wrap; }
.page-head h1 { font-size: 22px; margin: 0; letter-spacing: -0.02em; }
.page-head .sub { color: var(--muted); margin-top: 2px; }
.page-head > div:first-child { flex: 1 1 560px; min-width: 0; }
.page-head .actions { margin-left: auto; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.crumbs { color: var(--muted); font-size: 13px; margin-bottom: 4px; }
.panel { background: var(--panel); border: 1px solid var(--border); border-radius: 10px; padding: 16px 18px; margin-bottom: 18px; }
.section-head { display: flex; align-items: center; gap: 12px; margin-bottom: 12px; }
.section-head h2 { font-size: 15px; margin: 0; font-weight: 650; }
.section-head .extra { margin-left: auto; color: var(--muted); font-size: 12.5px; }
.cards { display: grid; grid-template-columns: repeat(6, minmax(0, 1fr)); gap: 12px; margin-bottom: 18px; }
.card { background: var(--panel); border: 1px solid var(--border); border-radius: 10px; padding: 14px 16px; }
.card-title { color: var(--muted); font-size: 12px; font-weight: 600; text-transform: uppercase; letter-spacing: 0.04em; }
.card-value { font-size: 24px; font-weight: 650; margin-top: 4px; letter-spacing: -0.02em; font-variant-numeric: tabular-nums; }
.card-sub { color: var(--muted); font-size: 12.5px; margin-top: 2px; }
.tone-pass { color: var(--pass); } .tone-fail { color: var(--fail); } .tone-err { color: var(--err); }
.delta-up { color: var(--pass); } .delta-down { color: var(--fail); }
.table-wrap { overflow-x: auto; }
table.data { border-collapse: collapse; width: 100%; font-size: 13px; }
table.data th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; padding: 8px 10px;
  border-bottom: 1px solid var(--border-strong); white-space: nowrap; background: #fafbfc; }
table.data td { padding: 7px 10px; border-bottom: 1px solid var(--border); vertical-align: middle; white-space: nowrap; }
table.result td { white-space: pre; }
table.data tbody tr:hover { background: #f8f9fc; }
table.data .num, table.data th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th[data-kind] { cursor: pointer; user-select: none; }
table.sortable th[data-kind]::after { content: " ↕"; color: #c3c8cf; font-size: 11px; }
table.sortable th[aria-sort=ascending]::after { content: " ↑"; color: var(--accent); }
table.sortable th[aria-sort=descending]::after { content: " ↓"; color: var(--accent); }
td.empty { color: var(--muted); text-align: center; padding: 22px; }
tr[data-href] { cursor: pointer; }
tr.selected td { background: var(--accent-soft); }
.msg { max-width: 380px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: var(--muted); }
/* A message column takes the width the other columns leave and cuts its text there, so a wide
   table never pushes its number columns out of view (`cell(..., class_="fill")`). */
table.data td.fill { width: 100%; max-width: 0; }
td.fill .msg { max-width: none; }
.mono, code, pre { font-family: var(--mono); font-size: 12.5px; }
.muted { color: var(--muted); }
.badge { display: inline-flex; align-items: center; gap: 4px; padding: 1px 8px 1px 6px; border-radius: 999px;
  font-size: 12px; font-weight: 600; white-space: nowrap; border: 1px solid transparent; }
.badge .icon { font-size: 11px; }
.badge-passed { color: var(--pass); background: var(--pass-bg); border-color: #c7ebd3; }
.badge-failed { color: var(--fail); background: var(--fail-bg); border-color: #f7cfd0; }
.badge-error { color: var(--err); background: var(--err-bg); border-color: #f4dcb0; }
.badge-unknown { color: var(--muted); background: #f0f2f4; border-color: var(--border); }
.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin-right: 7px; vertical-align: 0; }
.bar { position: relative; height: 6px; background: #eceef2; border-radius: 3px; width: 110px; display: inline-block; vertical-align: middle; margin-right: 8px; }
.bar > span { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 3px; background: var(--pass); }
.bar > span.fair { background: #e3a33a; } .bar > span.poor { background: #e0555b; }
#grid th[data-kind=num], #grid td.cellrun { text-align: center; }
#grid th:last-child, #grid td:last-child { text-align: right; }
.grid td.cellrun { white-space: nowrap; }
.chip { display: inline-flex; align-items: center; gap: 5px; padding: 2px 8px; border-radius: 6px; margin: 1px 3px 1px 0;
  font-size: 12px; font-variant-numeric: tabular-nums; border: 1px solid var(--border); color: var(--text); background: #fff; }
.chip:hover { text-decoration: none; border-color: var(--border-strong); }
.chip-passed { background: var(--pass-bg); border-color: #c7ebd3; } .chip-passed .icon { color: var(--pass); }
.chip-failed { background: var(--fail-bg); border-color: #f7cfd0; } .chip-failed .icon { color: var(--fail); }
.chip-error { background: var(--err-bg); border-color: #f4dcb0; } .chip-error .icon { color: var(--err); }
.chip .icon { font-weight: 700; }
form.filters { display: flex; gap: 10px; flex-wrap: wrap; align-items: flex-end; }
form.filters label { display: flex; flex-direction: column; gap: 3px; font-size: 12px; color: var(--muted); font-weight: 600; }
select, input[type=text], input[type=search], input[type=date], textarea {
  font: inherit; font-size: 13px; padding: 6px 9px; border: 1px solid var(--border-strong); border-radius: 7px; background: #fff; color: var(--text); }
textarea { width: 100%; min-height: 70px; resize: vertical; }
button, .button { font: inherit; font-size: 13px; font-weight: 600; padding: 6px 14px; border-radius: 7px; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; }
.button.secondary, button.secondary { background: #fff; color: var(--text); border-color: var(--border-strong); }
.button:hover { text-decoration: none; }
.filter-pill { display: inline-flex; gap: 6px; align-items: center; background: var(--accent-soft); color: var(--accent);
  border-radius: 999px; padding: 3px 10px; font-size: 12.5px; font-weight: 600; }
.two-col { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 18px; }
.side { display: grid; grid-template-columns: minmax(0, 2.2fr) minmax(280px, 1fr); gap: 18px; align-items: start; }
pre.code { background: #f7f8fb; border: 1px solid var(--border); border-radius: 8px; padding: 10px 12px; margin: 6px 0 0;
  overflow-x: auto; white-space: pre; line-height: 1.5; }
pre.text { white-space: pre-wrap; word-break: break-word; font-family: inherit; font-size: 13.5px; margin: 0; }
.reply { background: #fbfbfe; border: 1px solid var(--border); border-left: 3px solid var(--accent); border-radius: 8px; padding: 12px 14px; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; font-size: 13px; }
.kv dt { color: var(--muted); } .kv dd { margin: 0; font-variant-numeric: tabular-nums; }
.msgs { display: flex; flex-direction: column; gap: 10px; }
.m { border: 1px solid var(--border); border-radius: 8px; padding: 9px 12px; }
.m .role { font-size: 11.5px; text-transform: uppercase; letter-spacing: 0.05em; font-weight: 700; color: var(--muted); margin-bottom: 4px; }
.m-user { background: #f3f5ff; border-color: #dfe3fb; } .m-assistant { background: #fff; } .m-tool { background: #fafafa; }
.m-system { background: #fafafa; }
.toolcall { border: 1px solid var(--border); border-radius: 8px; margin-bottom: 10px; }
.toolcall > .tc-head { display: flex; gap: 10px; align-items: center; padding: 8px 12px; background: #fafbfc;
  border-bottom: 1px solid var(--border); border-radius: 8px 8px 0 0; }
.toolcall > .tc-body { padding: 4px 12px 10px; }
.tc-name { font-family: var(--mono); font-weight: 700; }
.label-small { font-size: 11.5px; font-weight: 700; color: var(--muted); text-transform: uppercase; letter-spacing: 0.05em; margin-top: 8px; }
[role=tablist] { display: flex; gap: 2px; border-bottom: 1px solid var(--border); margin-bottom: 10px; }
[role=tab] { background: none; border: none; border-bottom: 2px solid transparent; color: var(--muted); border-radius: 0;
  padding: 6px 12px; font-weight: 600; }
[role=tab][aria-selected=true] { color: var(--text); border-bottom-color: var(--accent); }
table.result td.meta, table.result th.meta { color: var(--faint); font-size: 12px; }
tr.row-actual td { background: #fff7f7; } tr.row-expected td { background: #f5fbf6; }
tr.row-diff td { background: #fff8f0; }
td.cell-diff { background: #fde2e1 !important; color: #8f1d22; font-weight: 700; box-shadow: inset 0 0 0 1px #f3b6b6; }
td.null { color: var(--faint); font-style: italic; }
.check { border: 1px solid var(--border); border-radius: 8px; padding: 10px 12px; margin-bottom: 10px; }
.check-head { display: flex; gap: 10px; align-items: center; }
.check-kind { font-weight: 650; }
.reason { margin: 6px 0 0; color: var(--text); }
.verdicts { margin: 8px 0 0; padding: 0; list-style: none; }
.verdicts li { padding: 6px 0; border-top: 1px dashed var(--border); }
.strip { display: inline-flex; gap: 3px; flex-wrap: wrap; }
.sq { width: 14px; height: 14px; border-radius: 3px; display: inline-block; background: #e5e7eb; }
.sq-passed { background: #4caf72; } .sq-failed { background: #e0555b; } .sq-error { background: #e3a33a; }
a.sq:hover { outline: 2px solid var(--accent); }
.sq.current { outline: 2px solid var(--text); outline-offset: 1px; }
.pager { display: flex; gap: 8px; }
.legend { display: flex; gap: 16px; flex-wrap: wrap; font-size: 12.5px; color: var(--muted); margin-top: 6px; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart text { font-family: inherit; font-size: 12px; fill: #7a8390; }
.empty-state { text-align: center; padding: 50px 20px; color: var(--muted); }
.empty-state h2 { color: var(--text); }
.alert { border-radius: 8px; padding: 10px 12px; background: var(--fail-bg); color: #8f1d22; border: 1px solid #f7cfd0; }
.notice { border-radius: 8px; padding: 10px 12px; background: var(--accent-soft); color: #3730a3; border: 1px solid #dcdffd; margin-bottom: 12px; }
.radio-row { display: flex; gap: 14px; margin-bottom: 8px; }
.radio-row label { display: flex; gap: 6px; align-items: center; font-weight: 600; }
.form-row { display: flex; gap: 8px; margin-top: 8px; }
.form-row input { flex: 1; }
.nowrap { white-space: nowrap; }
.label-entry { list-style: none; }
h3.run-title { font-size: 16px; margin: 28px 0 10px; display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
footer.foot { color: var(--faint); font-size: 12px; text-align: center; padding: 20px; }
@media (max-width: 1000px) { .cards { grid-template-columns: repeat(3, minmax(0, 1fr)); } .side, .two-col { grid-template-columns: 1fr; } }
"""

# No innerHTML anywhere: the script only moves, shows and hides nodes the server rendered.
JS = """
(function () {
  function each(list, fn) { Array.prototype.forEach.call(list, fn); }
  function sortKey(td, kind) {
    var v = td.hasAttribute('data-sort') ? td.getAttribute('data-sort') : td.textContent.trim();
    if (kind === 'num') { var n = parseFloat(v); return isNaN(n) ? -Infinity : n; }
    return v.toLowerCase();
  }
  function sortBy(table, index, th) {
    var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
    each(th.parentNode.cells, function (c) { if (c.hasAttribute('data-kind')) c.setAttribute('aria-sort', 'none'); });
    th.setAttribute('aria-sort', dir);
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var kind = th.getAttribute('data-kind'), sign = dir === 'ascending' ? 1 : -1;
    rows.sort(function (a, b) {
      if (!a.cells[index] || !b.cells[index]) return 0;
      var x = sortKey(a.cells[index], kind), y = sortKey(b.cells[index], kind);
      return x < y ? -sign : x > y ? sign : 0;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  each(document.querySelectorAll('table.sortable'), function (table) {
    each(table.tHead.rows[0].cells, function (th, index) {
      if (!th.hasAttribute('data-kind')) return;
      var go = function () { sortBy(table, index, th); };
      th.addEventListener('click', go);
      th.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); go(); } });
    });
  });
  each(document.querySelectorAll('[role=tablist]'), function (list) {
    var tabs = list.querySelectorAll('[role=tab]');
    each(tabs, function (tab) {
      tab.addEventListener('click', function () {
        each(tabs, function (t) {
          var on = t === tab;
          t.setAttribute('aria-selected', on ? 'true' : 'false');
          var panel = document.getElementById(t.getAttribute('aria-controls'));
          if (panel) panel.hidden = !on;
        });
      });
    });
  });
  each(document.querySelectorAll('form.autosubmit select'), function (s) {
    s.addEventListener('change', function () { s.form.submit(); });
  });
  each(document.querySelectorAll('input[data-filter-table]'), function (box) {
    var table = document.getElementById(box.getAttribute('data-filter-table'));
    var count = document.getElementById(box.getAttribute('data-filter-count'));
    if (!table) return;
    box.addEventListener('input', function () {
      var q = box.value.toLowerCase(), shown = 0;
      each(table.tBodies[0].rows, function (r) {
        var ok = r.textContent.toLowerCase().indexOf(q) >= 0;
        r.hidden = !ok; if (ok) shown++;
      });
      if (count) count.textContent = String(shown);
    });
  });
  each(document.querySelectorAll('tr[data-href]'), function (r) {
    r.addEventListener('click', function (e) {
      if (e.target.closest('a')) return;
      var href = r.getAttribute('data-href');
      if (href && href.charAt(0) === '/') window.location.assign(href);
    });
  });
})();
"""

FAVICON = (
    "data:image/svg+xml,"
    "%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Crect width='16' height='16' "
    "rx='4' fill='%234f46e5'/%3E%3Cpath d='M4 8.5l2.5 2.5L12 5' stroke='white' stroke-width='2' "
    "fill='none'/%3E%3C/svg%3E"
)

NAV = (
    ("overview", "/", "Overview"),
    ("runs", "/runs", "Runs"),
    ("trends", "/trends", "Trends"),
    ("recommendations", "/recommendations", "Recommendations"),
)
NAV_LABELS = ("labels", "/labels", "Labels")


def content_security_policy(nonce: str, *, header: bool = True) -> str:
    """Only our own inline script runs: an injected `<script>` has no nonce and is refused.
    (`frame-ancestors` only works as a header; a `<meta>` policy must leave it out.)"""
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'nonce-{nonce}'; form-action 'self'; base-uri 'none'"
    )
    return policy + "; frame-ancestors 'none'" if header else policy


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def page(
    title: str,
    body: Child,
    *,
    active: str = "",
    nonce: str,
    live: bool = True,
    note: str | None = None,
) -> Markup:
    """A whole document. `live` pages link to the server's other pages; an export does not."""
    nav = None
    if live:
        nav = el(
            "nav",
            [
                el("a", label, href=href, class_="active" if key == active else None)
                for key, href, label in (*NAV, NAV_LABELS)
            ],
            class_="tabs-nav",
        )
    header = el(
        "header",
        el(
            "div",
            el(
                "a" if live else "span",
                el("span", "✓", class_="logo"),
                "eval_pipeline",
                el("small", "results"),
                href="/" if live else None,
                class_="brand",
            ),
            nav,
            el("div", note, class_="top-right") if note else None,
            class_="top-inner",
        ),
        class_="top",
    )
    meta_csp = (
        None
        if live
        else el(
            "meta",
            http_equiv="Content-Security-Policy",
            content=content_security_policy(nonce, header=False),
        )
    )
    document = el(
        "html",
        el(
            "head",
            el("meta", charset="utf-8"),
            meta_csp,
            el("meta", name="viewport", content="width=device-width, initial-scale=1"),
            el("title", f"{title} · eval_pipeline"),
            el("link", rel="icon", href=FAVICON),
            el("style", Markup(CSS)),
        ),
        el(
            "body",
            header,
            el("main", body),
            el("script", Markup(JS), nonce=nonce),
        ),
        lang="en",
    )
    return join(Markup("<!doctype html>\n"), document)

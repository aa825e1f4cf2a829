"""`eval-pipeline test -m nao:<provider>:<model_id> -u USER --password PASS`: nao's own agent evaluated through a nao backend, a stand-in one and the real nao-core 0.3.29."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipeline.cli import build_parser
from eval_pipeline_tests.agents.nao_backend import EMAIL, PASSWORD, fake_nao_backend, nao_reply
from eval_pipeline_tests.agents.real_nao_backend import nao_config_yaml
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    exhausted,
    tool_calls,
)
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.cli.nao_files import key_paths
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.warehouses.servers import free_port

MODEL = "nao:openaiCompatible/vllm:qwen3"
NEXT_DAY, THIRD_DAY = "2026-01-02", "2026-01-03"
KEY_VARIABLE = "NAO_TEST_VLLM_KEY"
#: nao's agent, signed in with nao's flags.
NAO_ARGS = ("-m", MODEL, "-u", EMAIL, "--password", PASSWORD)
#: test → (prompt, reference SQL, the SQL the agent runs, the SQL nao's verification writes
#: over the agent's query table `{table}`). order_count: the agent is wrong (both verdicts
#: fail); customer_count: the agent is right and nao's verification is not (they disagree).
TESTS = {
    "total_revenue": (
        "What is the total revenue from all orders?",
        "SELECT SUM(amount) AS total_revenue FROM orders",
        "SELECT SUM(amount) AS total_revenue FROM orders",
        "SELECT total_revenue FROM {table}",
    ),
    "order_count": (
        "How many orders were placed?",
        "SELECT COUNT(*) AS orders FROM orders",
        "SELECT 2 AS orders",
        "SELECT orders FROM {table}",
    ),
    "customer_count": (
        "How many customers bought something?",
        "SELECT COUNT(DISTINCT customer) AS customers FROM orders",
        "SELECT COUNT(DISTINCT customer) AS customers FROM orders",
        "SELECT customers + 1 AS customers FROM {table}",
    ),
}
OURS = {"total_revenue": True, "order_count": False, "customer_count": True}
NAOS = {"total_revenue": True, "order_count": False, "customer_count": False}


def test_the_test_command_takes_naos_account_flags():
    args = build_parser().parse_args(["test", *NAO_ARGS])
    assert (args.username, args.password, args.models) == (EMAIL, PASSWORD, [MODEL])
    long = build_parser().parse_args(["test", "--username", EMAIL])
    assert long.username == EMAIL and long.password is None


def write_project(root: Path, *, llm_url: str, backend_url: str | None = None) -> Path:
    """A nao project as nao documents it, with our `eval_config.yaml` beside it."""
    (root / "tests").mkdir(parents=True)
    (root / "data").mkdir()
    with duckdb.connect(str(root / "data" / "shop.duckdb")) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, customer TEXT, amount DOUBLE)")
        connection.execute(
            "INSERT INTO orders VALUES (1, 'al', 10.5), (2, 'bo', 80.0), (3, 'bo', 42.25)"
        )
    for name, (prompt, sql, _agent, _verification) in TESTS.items():
        (root / "tests" / f"{name}.yml").write_text(
            f"name: {name}\nprompt: {prompt}\nsql: {sql}\n", encoding="utf-8"
        )
    (root / "nao_config.yaml").write_text(nao_config_yaml(llm_url, KEY_VARIABLE), encoding="utf-8")
    backend = f"nao_backend:\n  url: {backend_url}\n" if backend_url else ""
    (root / "eval_config.yaml").write_text(
        f"{backend}test:\n  extraction: last_query\n  threads: 2\n", encoding="utf-8"
    )
    return root


def eval_pipeline(project: Path, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [str(SCRIPT), "test", *args],
        cwd=project,
        env={**cli_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )


def as_json(project: Path, day: str, *args: str, env: dict[str, str] | None = None):
    """`eval-pipeline test --date DAY --format json ARGS`."""
    return eval_pipeline(project, "--date", day, "--format", "json", *args, env=env)


def stored_details(project: Path, day: str) -> dict[str, dict[str, Any]]:
    """Each test's `answerer_details` as `eval-pipeline sql` shows them."""
    query = (
        f"SELECT name, answerer_details FROM agent_runs WHERE run_date = DATE '{day}' ORDER BY name"
    )
    result = subprocess.run(
        [str(SCRIPT), "sql", query, "--format", "json"],
        cwd=project,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    return {
        row["name"]: (
            json.loads(row["answerer_details"])
            if isinstance(row["answerer_details"], str)
            else row["answerer_details"]
        )
        for row in rows
    }


def _test_of(prompt: str) -> str:
    return next(name for name, (p, *_rest) in TESTS.items() if p in prompt)


@pytest.mark.slow
def test_a_stand_in_backend_evaluated_through_the_test_command(tmp_path):
    """The whole command on the stand-in: verdicts, nao's verdicts stored, the account never
    written anywhere, a rerun reusing every run."""

    def script(body: dict[str, Any], _index: int):
        name = _test_of(body["prompt"])
        _prompt, _reference, agent_sql, _verification = TESTS[name]
        right = {
            "total_revenue": [{"total_revenue": 132.75}],
            "order_count": [{"orders": 3}],
            "customer_count": [{"customers": 2}],
        }[name]
        rows = [{"orders": 2}] if name == "order_count" else right
        checked = [{"customers": 3}] if name == "customer_count" else rows
        return nao_reply(
            "Done.", sql=agent_sql, rows=rows, verification_rows=checked, expected_rows=right
        )

    with fake_nao_backend(script) as backend:
        project = write_project(
            tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=backend.url
        )
        first = eval_pipeline(
            project,
            "--date",
            DAY,
            "--format",
            "json",
            *NAO_ARGS,
        )
        no_traceback(first)
        assert first.returncode == 1, first.stdout + first.stderr
        document = json.loads(first.stdout)
        assert {r["name"]: r["passed"] for r in document["results"]} == OURS
        # nao's own verdict beside ours, in the file and in the report.
        verdicts = {r["name"]: r["details"]["nao_verdict"] for r in document["results"]}
        assert {name: v["passed"] for name, v in verdicts.items()} == NAOS
        again = eval_pipeline(project, "--date", DAY, *NAO_ARGS)
        assert len(backend.runs) == 3  # the rerun sent nothing
    assert "3 stored run(s) reused" in again.stdout + again.stderr
    assert f"customer_count [{MODEL}]: ours passed, nao's failed (values differ)" in again.stdout
    assert "total_revenue [" not in again.stdout.split("Performance by Model")[1]
    details = stored_details(project, DAY)
    assert {name: d["nao"]["verdict"]["passed"] for name, d in details.items()} == NAOS
    assert {n: v["sql"] for n, v in verdicts.items()} == {
        name: d["nao"]["verification"]["sql"] for name, d in details.items()
    }
    for path in project.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


# ---- the real nao backend -----------------------------------------------------------------

_TABLE = re.compile(r"- (query_\w+) \(")
#: The backend's database while the module's backend runs; when `expire` is set, the next
#: LLM request deletes every session in it (the backend logging everyone out mid-evaluation).
_SESSIONS: dict[str, Any] = {"database": None, "expire": False}
#: When `test` is set, the LLM request of that test stops the backend's processes: the
#: backend goes away in the middle of its run.
_STOP: dict[str, Any] = {"test": None, "processes": ()}


def _expire_sessions() -> None:
    if _SESSIONS["expire"] and _SESSIONS["database"] is not None:
        _SESSIONS["expire"] = False
        connection = sqlite3.connect(_SESSIONS["database"], timeout=30)
        try:
            with connection:
                connection.execute("DELETE FROM session")
        finally:
            connection.close()


def _llm(request: RecordedRequest, _index: int) -> Step:
    """nao's agent loop: run the test's SQL, then answer; its verification (a structured
    output) gets the test's verification SQL over the table nao named."""
    _expire_sessions()
    body = request.json or {}
    messages = body.get("messages", [])
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    name = _test_of(" ".join(users))
    if _STOP["test"] == name:
        _STOP["test"] = None
        for process in _STOP["processes"]:
            process.kill()
        return exhausted("the backend was stopped")
    _prompt, _reference, agent_sql, verification = TESTS[name]
    if body.get("response_format"):
        table = _TABLE.search(users[-1])
        if table is None:
            return exhausted(f"no query table in {users[-1][:200]!r}")
        return answer(json.dumps({"sql": verification.format(table=table.group(1))}))
    if not any(m.get("role") == "tool" for m in messages):
        return tool_calls(execute_sql(agent_sql))
    return answer(f"Here is the answer to {name}.")


@pytest.fixture(scope="module")
def real_backend(tmp_path_factory: pytest.TempPathFactory):
    """nao-core 0.3.29's backend serving a small nao project, its LLM a scripted server, with
    one account signed up; skipped only when the wheel cannot be installed here."""
    from eval_pipeline_tests.agents.real_nao_backend import NaoUnavailable, nao_backend, nao_python

    started = time.monotonic()
    try:
        python = nao_python()
    except NaoUnavailable as error:
        pytest.skip(f"nao-core 0.3.29 could not be installed: {error}")
    installed_s = time.monotonic() - started
    root = tmp_path_factory.mktemp("nao")
    (root / "state").mkdir()
    with ScriptedServer("openai", script=_llm) as llm:
        project = write_project(root / "shop", llm_url=llm.base_url)
        env = {KEY_VARIABLE: "sk-scripted"}
        started = time.monotonic()
        _SESSIONS["database"] = root / "state" / "nao.sqlite"
        with nao_backend(python, project, root / "state", env) as backend:
            started_s = time.monotonic() - started
            backend.sign_up(EMAIL, PASSWORD)
            _STOP["processes"] = backend.processes
            config = project / "eval_config.yaml"
            config.write_text(f"nao_backend:\n  url: {backend.url}\n" + config.read_text())
            yield {
                "project": project,
                "backend": backend,
                "llm": llm,
                "installed_s": installed_s,
                "started_s": started_s,
            }


@pytest.mark.slow
def test_the_real_nao_backend_evaluated_through_the_test_command(real_backend):
    project, backend, llm = real_backend["project"], real_backend["backend"], real_backend["llm"]
    env = {KEY_VARIABLE: "sk-scripted"}
    started = time.monotonic()
    first = as_json(project, DAY, *NAO_ARGS, env=env)
    took_s = time.monotonic() - started
    no_traceback(first)
    assert first.returncode == 1, first.stdout + first.stderr + backend.log.read_text()[-3000:]
    results = {r["name"]: r for r in json.loads(first.stdout)["results"]}
    assert {name: r["passed"] for name, r in results.items()} == OURS, first.stdout
    for name, result in results.items():
        assert result["tokens"] > 0
        calls = result["details"]["tool_calls"]
        assert [c["toolName"] for c in calls] == ["execute_sql"]
        assert calls[0]["args"]["sql_query"] == TESTS[name][2]
    assert {r.headers.get("authorization") for r in llm.requests} == {"Bearer sk-scripted"}
    details = stored_details(project, DAY)
    assert {name: d["nao"]["verdict"]["passed"] for name, d in details.items()} == NAOS
    assert details["customer_count"]["nao"]["verification"]["data"] == [{"customers": 3}]
    assert details["total_revenue"]["nao"]["verdict"]["message"] == "match"
    on_backend = [d["nao"]["duration_ms"] / 1000 for d in details.values()]
    print(
        f"first evaluation of {len(TESTS)} tests: {took_s:.1f} s, "
        f"{sum(on_backend) / len(on_backend):.1f} s per run on the backend; "
        f"nao-core environment ready in {real_backend['installed_s']:.1f} s, "
        f"backend started in {real_backend['started_s']:.1f} s"
    )

    # The same day again: every run is reused, nothing reaches the backend's LLM.
    asked = len(llm.requests)
    again = eval_pipeline(project, "--date", DAY, *NAO_ARGS, env=env)
    no_traceback(again)
    assert f"{len(TESTS)} stored run(s) reused" in again.stdout + again.stderr
    assert len(llm.requests) == asked

    # Every session deleted while the evaluation runs (one run at a time, so the backend is
    # not writing its database then): the next run gets a 401, signs in again once and
    # completes.
    def sign_ins() -> int:
        return backend.log.read_text().count("POST /api/auth/sign-in/email 200")

    before = sign_ins()
    _SESSIONS["expire"] = True
    expired = as_json(project, THIRD_DAY, "-t", "1", *NAO_ARGS, env=env)
    no_traceback(expired)
    assert not _SESSIONS["expire"]  # the sessions were deleted during the evaluation
    results = json.loads(expired.stdout)["results"]
    assert [r["error"] for r in results] == [None] * len(TESTS), expired.stdout
    assert {r["name"]: r["passed"] for r in results} == OURS
    assert sign_ins() - before == 2  # at the start, and once after the 401
    asked = len(llm.requests)

    # A wrong password: every run an error, one line naming the backend and what to do.
    wrong = as_json(
        project, NEXT_DAY, "-m", MODEL, "-u", EMAIL, "--password", "not-the-right-one", env=env
    )
    no_traceback(wrong)
    errors = [r["error"] for r in json.loads(wrong.stdout)["results"]]
    assert len(errors) == len(TESTS) and all(errors), wrong.stdout
    assert all(f"{backend.url}/api/auth/sign-in/email" in e for e in errors)
    assert all("NAO_PASSWORD" in e and "\n" not in e for e in errors)
    assert len(llm.requests) == asked
    for path in project.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert PASSWORD.encode() not in content and b"not-the-right-one" not in content


# ---- nao's own tools on our file ---------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
#: What nao's viewer page loads from unpkg, served from the npm registry's packages instead.
VIEWER_SCRIPTS = {
    "https://unpkg.com/react@18/umd/react.production.min.js": (
        "react",
        "18.3.1",
        "umd/react.production.min.js",
    ),
    "https://unpkg.com/react-dom@18/umd/react-dom.production.min.js": (
        "react-dom",
        "18.3.1",
        "umd/react-dom.production.min.js",
    ),
    "https://unpkg.com/@babel/standalone/babel.min.js": (
        "@babel/standalone",
        "7.26.10",
        "babel.min.js",
    ),
}
NAO_MODEL = MODEL.removeprefix("nao:")


def _results_files(project: Path) -> set[Path]:
    return set((project / "tests" / "outputs").glob("results_*.json"))


def _nao_test(python: Path, project: Path, backend_url: str, home: Path) -> Path:
    """`nao test` itself (nao-core 0.3.29's CLI) on the project: the results file it writes."""
    home.mkdir(exist_ok=True)
    native = Path.home() / ".nao" / "native"  # the DuckDB engine, fetched once
    (home / ".nao").mkdir(exist_ok=True)
    if native.is_dir() and not (home / ".nao" / "native").exists():
        (home / ".nao" / "native").symlink_to(native)
    before = _results_files(project)
    done = subprocess.run(
        [
            str(python.with_name("nao")),
            "test",
            "-m",
            NAO_MODEL,
            "-u",
            EMAIL,
            "--password",
            PASSWORD,
        ],
        cwd=project,
        # Its own home: nao keeps the session cookie in ~/.nao/auth.json.
        env={
            **cli_env(),
            KEY_VARIABLE: "sk-scripted",
            "BACKEND_URL": backend_url,
            "HOME": str(home),
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    written = _results_files(project) - before
    assert len(written) == 1, done.stdout + done.stderr
    return written.pop()


@pytest.mark.slow
def test_our_file_has_every_key_path_naos_cli_writes_and_naos_viewer_shows_it(
    real_backend, tmp_path
):
    """nao's own `nao test`, on the same project and backend, writes the reference file: ours
    has each of its key paths with a kind of value nao writes there. Then nao's own viewer
    (`nao test server`'s page, in Chromium) opens our file, Diff tab included."""
    from eval_pipeline_tests.agents.real_nao_backend import nao_python

    project, backend = real_backend["project"], real_backend["backend"]
    nao_file = _nao_test(nao_python(), project, backend.url, tmp_path / "home")
    before = _results_files(project)
    ours = as_json(project, "2026-01-04", *NAO_ARGS, env={KEY_VARIABLE: "sk-scripted"})
    no_traceback(ours)
    (our_file,) = _results_files(project) - before

    theirs, mine = json.loads(nao_file.read_text()), json.loads(our_file.read_text())
    expected, found = key_paths(theirs), key_paths(mine)
    assert len(expected) > 50  # nao's file as nao writes it: results, details, summary, ...
    missing = sorted(set(expected) - set(found))
    assert not missing, missing
    wrong = {p: (found[p], expected[p]) for p in expected if not found[p] <= expected[p]}
    assert not wrong, wrong
    assert {r["attempt"] for r in theirs["results"]} == {r["attempt"] for r in mine["results"]}
    # An unpriced model: no cost in nao's reply, null in both files, never a made-up 0.
    assert {r["cost"] for r in theirs["results"]} == {r["cost"] for r in mine["results"]} == {None}

    _naos_viewer_shows(nao_python(), our_file, tmp_path)


def _naos_viewer_shows(python: Path, results_file: Path, tmp_path: Path) -> None:
    """nao's viewer (its own handler and page, from nao-core) serving `results_file` alone:
    the failed test's Diff tab shows our diff text, and the page never breaks."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - CI installs it with the dev extras
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from eval_pipeline_tests.viewer.npm_files import NpmUnavailable, npm_file

    try:
        scripts = {url: npm_file(*where) for url, where in VIEWER_SCRIPTS.items()}
    except NpmUnavailable as error:
        pytest.skip(f"nao's viewer page needs React and Babel from npm: {error}")
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (outputs / results_file.name).write_bytes(results_file.read_bytes())
    port = free_port()
    serve = (
        "import functools, socketserver, sys; from pathlib import Path; "
        "from nao_core.commands.test.server import TestResultsHandler; "
        "handler = functools.partial(TestResultsHandler, Path(sys.argv[1])); "
        "server = socketserver.TCPServer(('127.0.0.1', int(sys.argv[2])), handler); "
        "print('serving', flush=True); server.serve_forever()"
    )
    viewer = subprocess.Popen(
        [str(python), "-c", serve, str(outputs), str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert viewer.stdout is not None and viewer.stdout.readline().strip() == "serving"
        errors: list[str] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))

            def route(request_route) -> None:
                url = request_route.request.url
                if url in scripts:
                    request_route.fulfill(body=scripts[url], content_type="application/javascript")
                elif url.startswith(f"http://127.0.0.1:{port}/"):
                    request_route.continue_()
                else:
                    request_route.abort()

            page.route("**/*", route)
            page.goto(f"http://127.0.0.1:{port}/")
            row = page.locator("tr.clickable", has_text="order_count").first
            row.wait_for(timeout=30_000)
            row.click()
            page.get_by_role("button", name="Diff").click()
            shown = page.locator("pre", has_text="orders").last.inner_text(timeout=10_000)
            browser.close()
    finally:
        viewer.terminate()
        viewer.wait(timeout=10)
    order_count = next(
        r for r in json.loads(results_file.read_text())["results"] if r["name"] == "order_count"
    )
    assert shown.strip() == order_count["details"]["comparison"].strip()
    assert errors == [], (
        errors
    )  # React's error #31 blanked the page when `comparison` was an object


@pytest.mark.slow
def test_a_backend_stopped_mid_evaluation_ends_its_runs_as_errors_and_the_evaluation_goes_on(
    real_backend,
):
    """The module's last test: it stops the backend. One run at a time; the second test's run
    takes the backend down: that run and the next are errors naming the backend, the first
    completed, and the results file holds all three."""
    project, backend = real_backend["project"], real_backend["backend"]
    _STOP["test"] = "order_count"
    stopped = as_json(
        project, "2026-01-05", "-t", "1", *NAO_ARGS, env={KEY_VARIABLE: "sk-scripted"}
    )
    no_traceback(stopped)
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr  # error runs
    results = {r["name"]: r for r in json.loads(stopped.stdout)["results"]}
    assert set(results) == set(TESTS)
    assert results["customer_count"]["status"] == "passed"  # before the stop (suite order)
    for name in ("order_count", "total_revenue"):
        assert results[name]["status"] == "error", results[name]
        assert backend.url in results[name]["error"] and "\n" not in results[name]["error"]

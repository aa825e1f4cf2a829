"""Benchmark `eval-pipeline test` against nao's own `nao test` on the same nao project, side by side.

Run: python benchmarks/versus_nao.py [--tests 10] [--repeats 3] [--threads 4]

One nao project (`nao_config.yaml`, `tests/*.yml`, a DuckDB file) of `--tests` tests, and one
instant OpenAI-compatible model in its own process that plays both agents' parts: it runs the
test's SQL, then answers; nao's verification (a structured output) and our answer extraction
each get one query over the table they name. So every test costs three completions on either
side, and what is measured is each tool's own work.

* nao: nao-core 0.3.29's real backend (its FastAPI server and `nao-chat-server`) is started
  once and an account signed up, as `nao chat` leaves it; each repeat is `nao test` in the
  project (its first repeat signs in, as a user's first command does). The backend's start is
  printed apart: nao needs it running before a test runs, we do not.
  A `nao test` that hangs (120 s) or fails a test is run again, at most twice, and the
  reason printed; with several threads nao 0.3.29 now and then does either.
* ours, fresh: `eval-pipeline test` on a new copy of the project (no `.eval/` folder yet),
  our built-in agent driven by the same model: what a user's first run costs.
* ours, unchanged rerun: the same command again in the last copy.
* our pipeline alone: the fresh run's stage functions called from a script
  (`pipeline_alone.py`), in another new copy: what the command costs beside its work.
* the fresh run's Dagster record, written by a process of its own once the command ended:
  how long after the command it is in the instance (waited for, never overlapping a
  measurement).

Medians of `--repeats`, the sides interleaved, the load average beside them, and the ratio
ours / nao (target: ≤ 1 for the fresh run). The import baseline (`import dagster, duckdb,
pandas`) is printed too, so figures from machines of other speeds can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

# The test helpers (eval_pipeline_tests) are not installed: import them from this checkout.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_pipeline_tests.agents.real_nao_backend import (  # noqa: E402
    nao_backend,
    nao_config_yaml,
    nao_python,
)
from eval_pipeline_tests.agents.servers import (  # noqa: E402
    RecordedRequest,
    ServerProcess,
    Step,
    answer,
    execute_sql,
    tool_calls,
)
from eval_pipeline_tests.cli.console import wait_for_record  # noqa: E402

SCRIPT = Path(sys.executable).with_name("eval-pipeline")
MODEL = "openaiCompatible/vllm:qwen3"
KEY_VARIABLE = "NAO_BENCH_VLLM_KEY"
EMAIL, PASSWORD = "bench@example.com", "bench-password-1234"
DAY = "2026-03-02"

#: (question, SQL): the reference, and what the scripted agent runs (so every test passes).
QUESTIONS = [
    ("What is the total revenue of all orders?", "SELECT SUM(amount) AS total_revenue FROM orders"),
    ("How many orders were placed?", "SELECT COUNT(*) AS orders FROM orders"),
    ("How many customers bought?", "SELECT COUNT(DISTINCT customer) AS customers FROM orders"),
    ("What is the largest order?", "SELECT MAX(amount) AS largest FROM orders"),
    ("What is the smallest order?", "SELECT MIN(amount) AS smallest FROM orders"),
    ("What is the average order?", "SELECT ROUND(AVG(amount), 2) AS average FROM orders"),
    (
        "What is the revenue per customer?",
        "SELECT customer, SUM(amount) AS revenue FROM orders GROUP BY customer",
    ),
    (
        "How many orders has each customer?",
        "SELECT customer, COUNT(*) AS orders FROM orders GROUP BY customer",
    ),
    ("Which order is the largest?", "SELECT id FROM orders ORDER BY amount DESC LIMIT 1"),
    (
        "How many orders are above 40?",
        "SELECT COUNT(*) AS big_orders FROM orders WHERE amount > 40",
    ),
]

_QUESTION = re.compile(r"Question (\d+):")
_NAO_TABLE = re.compile(r"- (query_\w+) \(")
_OUR_TABLE = re.compile(r"Table (\w+) \(")


def _sql_of(text: str) -> str:
    found = _QUESTION.search(text)
    if found is None:
        raise ValueError(f"no test question in {text[:200]!r}")
    return QUESTIONS[int(found.group(1)) % len(QUESTIONS)][1]


def _model(request: RecordedRequest, _index: int) -> Step:
    """Both agents' loop (the test's SQL, then the answer), nao's verification and our
    extraction (one query over the table each names)."""
    body = request.json or {}
    messages = body.get("messages", [])
    text = " ".join(str(m.get("content")) for m in messages if m.get("role") in ("user", "system"))
    if body.get("response_format"):  # nao's verification
        table = _NAO_TABLE.search(text)
        return answer(json.dumps({"sql": f"SELECT * FROM {table.group(1) if table else 'x'}"}))
    if "You turn the results an analytics assistant fetched" in text:  # our extraction
        table = _OUR_TABLE.search(text)
        return answer(f"SELECT * FROM {table.group(1) if table else 'x'}")
    if not any(m.get("role") == "tool" for m in messages):
        return tool_calls(execute_sql(_sql_of(text)))
    return answer("Here is the answer.")


def make_model():
    return _model


def write_project(root: Path, tests: int, llm_url: str) -> Path:
    """A nao project as nao documents it: its config, its tests, a DuckDB file."""
    (root / "tests").mkdir(parents=True)
    (root / "data").mkdir()
    with duckdb.connect(str(root / "data" / "shop.duckdb")) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, customer TEXT, amount DOUBLE)")
        connection.execute(
            "INSERT INTO orders SELECT i, 'c' || (i % 7), (i * 37 % 101) + 0.25 "
            "FROM range(1, 201) t(i)"
        )
    for i in range(tests):
        question, sql = QUESTIONS[i % len(QUESTIONS)]
        (root / "tests" / f"test_{i:03d}.yml").write_text(
            f"name: test_{i:03d}\nprompt: 'Question {i}: {question}'\nsql: {sql}\n",
            encoding="utf-8",
        )
    (root / "nao_config.yaml").write_text(nao_config_yaml(llm_url, KEY_VARIABLE), encoding="utf-8")
    return root


def env(**more: str) -> dict[str, str]:
    drop = {"DAGSTER_HOME", "EVAL_SUITE_DIR", "FORCE_COLOR", "CLICOLOR_FORCE"}
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return {**base, KEY_VARIABLE: "sk-bench", **more}


#: A command that has not ended by then hung (nao 0.3.29's client, with several threads, now
#: and then waits for ever on a reply its backend logged as sent): it is stopped.
HUNG_S = 120.0
#: nao's runs that were run again, and why (they are not timed).
RETRIED: list[str] = []


def timed(
    args: list[str], cwd: Path, environment: dict[str, str], passed: str, *, retry: bool = False
) -> float:
    """The wall time of a command that must end with every test passed (`passed` in its
    output). With `retry` (nao, whose backend now and then hangs or fails a run under
    several threads) a run that hung or did not pass every test is run again, twice at most."""
    for _ in range(3 if retry else 1):
        started = time.perf_counter()
        try:
            done = subprocess.run(
                args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=HUNG_S
            )
        except subprocess.TimeoutExpired:
            problem = f"hung for {HUNG_S:g} s"
        else:
            wall = time.perf_counter() - started
            output = done.stdout + done.stderr
            if done.returncode == 0 and passed in output:
                return wall
            failed = [line.strip() for line in output.splitlines() if "✗" in line or "rror" in line]
            problem = f"exited {done.returncode}: {' | '.join(failed[:3]) or output[-1500:]}"
        if retry:
            RETRIED.append(f"{Path(args[0]).name}: {problem}")
    raise SystemExit(f"{' '.join(args)} {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    options = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start")
    python = nao_python()
    nao = python.with_name("nao")
    work = Path(tempfile.mkdtemp(prefix="versus_nao_"))
    try:
        baseline = statistics.median(_import_baseline(work) for _ in range(options.repeats))
        print(f"import baseline (dagster, duckdb, pandas): {baseline:.2f} s")
        with ServerProcess(make_model) as llm_url:
            project = write_project(work / "nao_project", options.tests, llm_url)
            (project / "nao_config.yaml").write_text(
                (project / "nao_config.yaml").read_text()
                + f"test:\n  threads: {options.threads}\n",
                encoding="utf-8",
            )
            state = work / "nao_state"
            state.mkdir()
            home = work / "home"
            (home / ".nao").mkdir(parents=True)
            native = Path.home() / ".nao" / "native"  # the DuckDB engine, fetched once
            if native.is_dir():
                (home / ".nao" / "native").symlink_to(native)
            started = time.perf_counter()
            with nao_backend(python, project, state, env()) as backend:
                backend_s = time.perf_counter() - started
                backend.sign_up(EMAIL, PASSWORD)
                nao_env = env(BACKEND_URL=backend.url, HOME=str(home))
                nao_args = [
                    str(nao),
                    "test",
                    "-m",
                    MODEL,
                    "-u",
                    EMAIL,
                    "--password",
                    PASSWORD,
                    "-t",
                    str(options.threads),
                ]
                ours_args = [
                    str(SCRIPT),
                    "test",
                    "-q",
                    "--date",
                    DAY,
                    "-m",
                    MODEL,
                    "-t",
                    str(options.threads),
                ]
                naos_pass = f"All {options.tests} test(s) passed"
                ours_pass = f"{options.tests}/{options.tests} passed"
                # Our pipeline's own steps in a process without Dagster (the model id as the
                # command normalises nao's provider name).
                alone_args = [sys.executable, str(ROOT / "benchmarks" / "pipeline_alone.py")]
                alone_model = MODEL.removeprefix("openaiCompatible/")
                theirs, fresh, rerun, alone, recorded = [], [], [], [], []
                for i in range(options.repeats):
                    theirs.append(timed(nao_args, project, nao_env, naos_pass, retry=True))
                    copy = work / f"ours_{i}"
                    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("outputs"))
                    fresh.append(timed(ours_args, copy, env(), ours_pass))
                    # Its Dagster record, written in the background: not timed, not overlapped.
                    recorded.append(wait_for_record(copy) or 0.0)
                    rerun.append(timed(ours_args, copy, env(), ours_pass))
                    bare = work / f"alone_{i}"
                    shutil.copytree(project, bare, ignore=shutil.ignore_patterns("outputs"))
                    alone.append(
                        timed(
                            [*alone_args, str(bare), alone_model, "--date", DAY],
                            bare,
                            env(),
                            ours_pass,
                        )
                    )
        nao_s, fresh_s, rerun_s, alone_s = (
            statistics.median(x) for x in (theirs, fresh, rerun, alone)
        )
        print(f"nao backend start (once, before any nao test): {backend_s:.2f} s")
        print(f"{options.tests} tests, -t {options.threads}, medians of {options.repeats}:")
        print(f"  nao test (backend running)  {nao_s:6.2f} s  {_all(theirs)}")
        print(
            f"  ours, fresh                 {fresh_s:6.2f} s  {_all(fresh)}  "
            f"= {fresh_s / nao_s:.2f}× nao (target ≤ 1), {fresh_s / baseline:.2f}× baseline"
        )
        print(
            f"  ours, unchanged rerun       {rerun_s:6.2f} s  {_all(rerun)}  "
            f"= {rerun_s / nao_s:.2f}× nao"
        )
        print(
            f"  our pipeline alone, fresh   {alone_s:6.2f} s  {_all(alone)}  "
            f"= {alone_s / nao_s:.2f}× nao: the same steps called from a script "
            f"(benchmarks/pipeline_alone.py); the command costs {fresh_s - alone_s:.2f} s more"
        )
        print(
            f"  our fresh run's Dagster record, in the background after it: in the instance "
            f"{statistics.median(recorded):.2f} s after the command ended ({_all(recorded)})"
        )
        for retried in RETRIED:
            print(f"run again (not timed): {retried}")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _all(walls: list[float]) -> str:
    return "(" + ", ".join(f"{w:.2f}" for w in walls) + ")"


def _import_baseline(cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import dagster, duckdb, pandas"], cwd=cwd, check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())

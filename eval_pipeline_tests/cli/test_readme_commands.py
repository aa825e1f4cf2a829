"""The commands of the README and of docs/, each run through the real `eval-pipeline` script (the
`duckdb` one through the DuckDB shell a user installs, `pip install duckdb-cli`) on a fresh copy
of the sample suite: every command of their ```bash blocks and of the README's Commands table is
either run here, with the exit code and the output the README shows, or excused below with the
reason. A command the README gains fails `test_every_readme_command_is_run_or_excused` until it
is one or the other.

The first command (`eval-pipeline test`: the warehouse build, then 47 runs) runs once, on a
terminal as a new user sees it; the commands that read results share its store.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder, fetch_read_only
from eval_pipeline.suite import load_config, load_suite
from eval_pipeline_tests.cli.console import SCRIPT, cli_env, no_traceback
from eval_pipeline_tests.conftest import copy_sample_suite

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
#: The README and every page of docs/: their commands and SQL are run alike.
DOCUMENTS = README + "".join(
    page.read_text(encoding="utf-8") for page in sorted((REPO / "docs").glob("*.md"))
)
COLUMNS = 120  # the terminal the README's output was taken on
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# Commands that cannot run here, with the reason; the rest of the README's commands run below.
EXCUSED = {
    "python3 -m venv .venv": "makes the environment these tests already run in",
    ". .venv/bin/activate": "makes the environment these tests already run in",
    "pip install -e .": "installs this package (from the package index); these tests run it",
    "pip install -e '.[dev]'": "installs this package (from the package index); these tests run it",
    "python -m pytest": "the test suite this test is part of",
    "export OPENAI_API_KEY=...": "a real API key",
    "eval-pipeline test -m openai:gpt-4.1 -m openai:gpt-4.1-mini -t 8": (
        "live models: an OpenAI key and the internet"
    ),
    "eval-pipeline ui": "serves until stopped (test_cli_ui.py starts and stops it)",
    "eval-pipeline ui [--port 3000] [--host 127.0.0.1]": "serves until stopped (test_cli_ui.py)",
    'export DAGSTER_HOME="$PWD/tests_suite/.eval/dagster_home"': "sets up `dg dev`, which serves",
    'mkdir -p "$DAGSTER_HOME"': "sets up `dg dev`, which serves until stopped",
    'cp -n eval_pipeline/dagster.yaml "$DAGSTER_HOME/"': "sets up `dg dev`, which serves",
    "dg dev -w workspace.yaml": "serves until stopped (test_cli_ui.py starts `eval-pipeline ui`)",
    "eval-pipeline server": "serves until stopped (the viewer's tests start it)",
    "eval-pipeline server [--port 8765] [--host 127.0.0.1] [--no-open]": (
        "serves until stopped (the viewer's tests start it)"
    ),
    # docs/dagster.md "Deploying": servers on machines of their own; the same instance, daemon and
    # webserver are started by pipeline/test_daemon_backfill.py on a throwaway PostgreSQL.
    **dict.fromkeys(
        [
            "export DAGSTER_HOME=/srv/dagster",
            'cp deploy/dagster.yaml "$DAGSTER_HOME/"',
            "export EVAL_SUITE_DIR=/srv/suite DAGSTER_PG_HOST=… DAGSTER_PG_PASSWORD=…",
            "dagster-webserver -w deploy/workspace.yaml -h 0.0.0.0 -p 3000 &",
            "dagster-daemon run -w deploy/workspace.yaml &",
        ],
        "a deployment on servers (test_daemon_backfill.py runs it on a throwaway PostgreSQL)",
    ),
    "pip install duckdb-cli": (
        "installs the DuckDB shell from the package index: the `older_duckdb_cli` fixture "
        "installs the same wheel into a folder of its own, and the `duckdb` command runs here"
    ),
    # docs/adaptive-budgets.md: your agents or live models; cli/test_cli_budget.py runs a
    # budget through the script on scripted agents.
    **dict.fromkeys(
        [
            "eval-pipeline test -m http:a -m http:b --budget 200",
            "eval-pipeline test -m openai:gpt-4.1 --budget 150 --width 0.25",
            "eval-pipeline test -m openai:gpt-4.1 -m anthropic:claude-sonnet-4-5 --budget-usd 5",
        ],
        "agents of the user's or live models (test_cli_budget.py runs a budget on scripted ones)",
    ),
    # docs/usage.md and the README's table: the user's own production traces; usage/test_import.py
    # and usage/test_recommend.py run these commands on a generated month of traces.
    **dict.fromkeys(
        [
            "eval-pipeline usage import traces/*.jsonl",
            "eval-pipeline recommend",
            "eval-pipeline promote r_3f2a9c81d0",
            "eval-pipeline usage import PATH... [--source otel|nao|jsonl]",
            "eval-pipeline recommend [--since D] [--format table|json]",
            "eval-pipeline promote ID [--name NAME]",
        ],
        "the user's production traces (usage/test_import.py, test_recommend.py run them on "
        "generated ones)",
    ),
    "eval-pipeline import-csv FILE": (
        "FILE is the user's Calibrate CSV; the sample suite ships none (test_cli_exit_codes.py)"
    ),
}

# The Commands table gives synopses: each runs as these commands (placeholders filled in).
SYNOPSES = {
    "eval-pipeline init [DIR] [--warehouse FILE|--url URL]": [
        "eval-pipeline init my_suite --warehouse tests_suite/warehouse.duckdb"
    ],
    "eval-pipeline test": ["eval-pipeline test"],
    "eval-pipeline list": ["eval-pipeline list"],
    "eval-pipeline diff [--base D] [--date D] [--model M]": ["eval-pipeline diff"],
    'eval-pipeline sql ["SELECT …"] [--format table|csv|json]': [
        "eval-pipeline sql",
        'eval-pipeline sql "SELECT model, run_date, pass_rate FROM model_summaries '
        'ORDER BY run_date"',
        'eval-pipeline sql "SELECT count(*) AS runs FROM grades" --format csv',
    ],
    "eval-pipeline export --format csv|html [--date D] [-o FILE]": [
        "eval-pipeline export --format csv",
        "eval-pipeline export --format html -o results.html",
    ],
    "eval-pipeline import-results FILE...": [
        "eval-pipeline import-results tests_suite/outputs/results_*.json"
    ],
    "eval-pipeline compact": ["eval-pipeline compact"],
    "eval-pipeline warehouse": ["eval-pipeline warehouse"],
    "eval-pipeline diff FILE FILE | --last [--model M] [--test T] [-q] [--no-fail]": [
        "eval-pipeline diff --last"
    ],
    "eval-pipeline summary [-f FILE] [--json]": ["eval-pipeline summary"],
}


def bash_commands(text: str) -> list[str]:
    """Each command of the ```bash blocks: a line without its comment, split at `&&`."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def table_commands(text: str) -> list[str]:
    """The command cell of each row of the Commands table, as written (`\\|` is a `|`)."""
    section = text.split("\n## Commands\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(eval-pipeline[^`]*)` \|", section, re.MULTILINE)
    return [row.replace("\\|", "|") for row in rows]


def sql_blocks(text: str) -> str:
    """A page's ```sql blocks, as one script a person could paste into the prompt."""
    return "".join(re.findall(r"^```sql\n(.*?)^```", text, re.DOTALL | re.MULTILINE))


def shown_output(text: str) -> list[str]:
    """The lines of the first command's output as the README shows it ("…" lines are the
    abridged parts)."""
    after = text.split("What the first command prints", 1)[1]
    block = re.search(r"^```\n(.*?)^```", after, re.DOTALL | re.MULTILINE)
    assert block, "the README no longer shows what the first command prints"
    return [line.rstrip() for line in block.group(1).splitlines() if line.strip() != "…"]


def _varying(line: str) -> str:
    """A line with what differs between two runs masked: durations, the progress counter
    (runs finish in any order), the results file's time."""
    line = re.sub(r"(?<![\d.])\d+\.\d(?![\d%])", "#.#", line)
    line = re.sub(r"\[\d+/", "[#/", line)
    return re.sub(r"results_\d{8}_\d{6}\.json", "results_#.json", line)


def _pattern(shown: str) -> re.Pattern[str]:
    """A shown line as a pattern: an "…" the README put in a line stands for what it left out
    (a message cut at another width, the folder the user works in)."""
    parts = [re.escape(part) for part in _varying(shown).split("…")]
    return re.compile(".*".join(parts))


def run_on_terminal(args: list[str], cwd: Path) -> tuple[int, list[str]]:
    """`eval-pipeline` on a terminal `COLUMNS` wide, as a person runs it: the screen's lines
    (stdout and stderr as they interleave), with colours dropped and the live status line,
    which the command erases, gone."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    env = {k: v for k, v in cli_env().items() if k not in {"COLUMNS", "LINES", "NO_COLOR"}}
    process = subprocess.Popen(
        [str(SCRIPT), *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env={**env, "TERM": "xterm-256color"},
    )
    os.close(follower)
    raw = b""
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the command ended and closed the terminal
                break
            if not chunk:
                break
            raw += chunk
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    # A carriage return goes back to the line's start: what follows the last one is what stays.
    text = CSI.sub("", raw.decode("utf-8", errors="replace"))
    return code, [line.rstrip("\r").split("\r")[-1].rstrip() for line in text.split("\n")]


def run_cli(command: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """A README command line through the real script, its `tests_suite/…` globs expanded as
    a shell would."""
    args = []
    for word in shlex.split(command)[1:]:
        matches = sorted(cwd.glob(word)) if "*" in word else []
        args += [str(match.relative_to(cwd)) for match in matches] or [word]
    result = subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        env=cli_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    no_traceback(result)
    return result


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone's folder: the sample suite's sources, nothing built, nothing evaluated."""
    root = tmp_path_factory.mktemp("clone")
    copy_sample_suite(root / "tests_suite")
    return root


@pytest.fixture(scope="module")
def first(clone: Path) -> tuple[int, list[str]]:
    """The README's first command, once for the module: the commands after it read its
    results."""
    return run_on_terminal(["test"], clone)


def test_every_readme_command_is_run_or_excused():
    run = {command for commands in SYNOPSES.values() for command in commands} | set(CHECKS)
    unknown = [
        command
        for command in bash_commands(DOCUMENTS)
        if command not in EXCUSED and command not in run
    ]
    unknown += [command for command in table_commands(README) if command not in EXCUSED | SYNOPSES]
    assert not unknown, f"README commands neither run nor excused here: {unknown}"
    assert "eval-pipeline test" in bash_commands(README)  # the parsing still finds them
    assert "eval-pipeline ui" in bash_commands(DOCUMENTS)  # in docs/dagster.md
    assert len(table_commands(README)) >= 10


def test_the_first_command_prints_what_the_readme_shows_and_exits_1(first):
    code, lines = first
    screen = "\n".join(lines)
    assert code == 1, screen  # some tests fail on purpose
    assert "Traceback" not in screen, screen
    at = 0
    for shown in shown_output(README):
        pattern = _pattern(shown)
        found = next(
            (i for i in range(at, len(lines)) if pattern.fullmatch(_varying(lines[i]))), None
        )
        assert found is not None, f"README line not printed (in order):\n{shown}\n\n{screen}"
        at = found + 1


def evaluated_day(clone: Path) -> str:
    """The day the first command evaluated (`eval-pipeline test` evaluates today, UTC), from
    its results file's name: read, since this module may run minutes after it was imported,
    and past midnight."""
    first_file = min((clone / "tests_suite" / "outputs").glob("results_*.json"))
    stamp = first_file.name.split("_")[1]
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}"


def test_running_it_again_answers_from_the_store_as_the_readme_says(clone, first):
    """The README: run it again and nothing is re-run; with nothing changed (the warehouse
    was built by the first run), Dagster is not started at all."""
    again = run_cli("eval-pipeline test", clone)
    assert again.returncode == 1, again.stdout + again.stderr
    prose = " ".join(DOCUMENTS.split())  # the quoted line may be folded across lines
    said = re.search(r"`(nothing changed since the last evaluation of [^`]*)`", prose)
    assert said, "the README no longer quotes the line"
    line = said.group(1).replace("<day>", evaluated_day(clone))
    assert line in again.stdout, again.stdout
    assert "34/47 passed (72.3%)" in again.stdout, again.stdout


Result = subprocess.CompletedProcess


def _lists_the_suite(result: Result, _: Path) -> None:
    assert re.search(r"^43 test\(s\) in \S+cases$", result.stdout, re.MULTILINE), result.stdout


def _nothing_to_compare_yet(result: Result, _: Path) -> None:
    # One evaluated day: no earlier day, so nothing regressed.
    assert "replay:demo: no earlier day" in result.stdout, result.stdout


def _pass_rate_of_the_day(result: Result, cwd: Path) -> None:
    day = evaluated_day(cwd)
    assert re.search(rf"replay:demo\s+│\s+{day}\s+│\s+0\.7234", result.stdout), result.stdout


def _the_two_files_agree(result: Result, _: Path) -> None:
    # The first command's results file and its rerun's: the same 43 tests of replay:demo.
    last = result.stdout.splitlines()[-1]
    assert last == "Summary: 0 regressions, 0 fixes, 43 unchanged, 0 added, 0 removed", last


def _sums_up_the_last_file(result: Result, _: Path) -> None:
    first_line = result.stdout.splitlines()[0]
    assert ": 34 passed, 13 failed, 47 total, cost unknown, " in first_line, first_line
    assert re.search(r"^  replay:demo  34/47 passed \(72\.3%\)", result.stdout, re.M), result.stdout


def _runs_as_csv(result: Result, _: Path) -> None:
    assert result.stdout == "runs\n47\n", result.stdout


def _lists_the_tables(result: Result, _: Path) -> None:
    # A dot-command given as the argument, as at the prompt.
    assert re.search(r"^│ model_summaries\s+│$", result.stdout, re.MULTILINE), result.stdout


def _pass_rate_in_the_duckdb_shell(result: Result, cwd: Path) -> None:
    assert "replay:demo" in result.stdout and evaluated_day(cwd) in result.stdout, result.stdout
    assert "0.7234" in result.stdout, result.stdout
    assert not result.stderr, result.stderr


def _a_row_per_run(result: Result, _: Path) -> None:
    rows = list(csv.reader(io.StringIO(result.stdout)))  # replies and SQL span lines
    assert rows[0][:3] == ["run_date", "model", "name"] and len(rows) == 1 + 47, rows[:3]


def _a_page(result: Result, cwd: Path) -> None:
    assert "wrote results.html (a self-contained page)" in result.stderr, result.stderr
    assert (cwd / "results.html").read_text(encoding="utf-8").lstrip().lower().startswith("<!doc")


def _imports_the_results_file(result: Result, cwd: Path) -> None:
    # The runs in that file are the ones already stored: the day still has 47, not twice that
    # (counted by the query function of `eval-pipeline sql`, which the command above ran).
    assert "already in the store: " in result.stdout, result.stdout
    assert "0 run(s) from 0 file(s) imported; days: none" in result.stdout, result.stdout
    layout = StateFolder.of(load_config(cwd / "tests_suite"))
    assert fetch_read_only(layout, "SELECT count(*) AS runs FROM grades") == (["runs"], [(47,)])


def _compacts(result: Result, _: Path) -> None:
    assert result.stdout.startswith("compacted "), result.stdout + result.stderr


def _starts_a_suite_that_list_accepts(result: Result, cwd: Path) -> None:
    assert result.stdout.startswith("wrote eval_config.yaml\n"), result.stdout + result.stderr
    assert "its reference SQL ran read-only on the warehouse" in result.stdout, result.stdout
    assert result.stdout.rstrip().endswith("cd my_suite && eval-pipeline test"), result.stdout
    # What `eval-pipeline list` loads (it ran above, on the sample suite): the suite, one test.
    assert len(load_suite(cwd / "my_suite").cases) == 1


def _builds_the_warehouse(result: Result, _: Path) -> None:
    assert "warehouse built:" in result.stdout, result.stdout + result.stderr


# What each command that runs must show: the exit code the README gives and the lines a user
# looks for. Run in this order, after the first command (`warehouse` rebuilds: last).
CHECKS: dict[str, tuple[int, Callable[[Result, Path], None]]] = {
    "eval-pipeline list": (0, _lists_the_suite),
    "eval-pipeline diff": (0, _nothing_to_compare_yet),
    'eval-pipeline sql "SELECT model, run_date, pass_rate FROM model_summaries '
    'ORDER BY run_date"': (0, _pass_rate_of_the_day),
    'eval-pipeline sql "SELECT count(*) AS runs FROM grades" --format csv': (0, _runs_as_csv),
    'eval-pipeline sql ".tables"': (0, _lists_the_tables),
    'duckdb -readonly tests_suite/.eval/results.duckdb "SELECT model, run_date, pass_rate '
    'FROM model_summaries"': (0, _pass_rate_in_the_duckdb_shell),
    "eval-pipeline export --format csv": (0, _a_row_per_run),
    "eval-pipeline export --format html -o results.html": (0, _a_page),
    "eval-pipeline import-results tests_suite/outputs/results_*.json": (
        0,
        _imports_the_results_file,
    ),
    "eval-pipeline compact": (0, _compacts),
    "eval-pipeline init my_suite --warehouse tests_suite/warehouse.duckdb": (
        0,
        _starts_a_suite_that_list_accepts,
    ),
    "eval-pipeline warehouse": (0, _builds_the_warehouse),
    "eval-pipeline diff --last": (0, _the_two_files_agree),
    "eval-pipeline summary": (0, _sums_up_the_last_file),
}


def test_the_prompt_answers_the_readmes_sql(clone, first):
    """`eval-pipeline sql` with the SQL blocks of the pages about the results piped in, as a
    person pasting them (docs/warehouses.md's SQL is for a warehouse: the read-only role)."""
    pages = [REPO / "docs" / name for name in ("results-in-sql.md", "viewer.md")]
    script = "".join(sql_blocks(page.read_text(encoding="utf-8")) for page in pages)
    result = run_cli("eval-pipeline sql", clone, stdin=script)
    assert result.returncode == 0, result.stderr  # a piped script: 2 if a statement failed
    assert "error" not in result.stderr, result.stderr
    for header in ("pass_rate", "message", "failure_kind", "flaky_days", "note"):
        assert header in result.stdout, result.stdout  # every statement printed its table
    assert "revenue_growth_month_over_month" in result.stdout  # the sample's flaky test


KNOWN_DEFECTS: dict[str, str] = {}  # command → why it fails today (xfail, strict)


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[c]))
        if c in KNOWN_DEFECTS
        else c
        for c in CHECKS
    ],
)
def test_the_readme_command_runs_as_documented(clone, first, command, request):
    code, check = CHECKS[command]
    if command.startswith("duckdb "):  # the DuckDB shell a user installs (`pip install duckdb-cli`)
        shell = request.getfixturevalue("older_duckdb_cli")
        result = subprocess.run(
            shlex.split(command), cwd=clone, env=shell.env(), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    else:
        if command == "eval-pipeline diff --last":
            request.getfixturevalue("two_results_files")
        result = run_cli(command, clone)
    assert result.returncode == code, result.stdout + result.stderr
    check(result, clone)


@pytest.fixture(scope="module")
def two_results_files(clone: Path, first) -> None:
    """The first command's results file and a second one: the README's rerun writes it (its
    test may have run already)."""
    if len(list((clone / "tests_suite" / "outputs").glob("results_*.json"))) < 2:
        assert run_cli("eval-pipeline test", clone).returncode == 1


def test_every_command_that_runs_is_checked():
    run = {command for commands in SYNOPSES.values() for command in commands}
    run |= {c for c in bash_commands(DOCUMENTS) if c not in EXCUSED}
    checked = set(CHECKS) | {"eval-pipeline test", "eval-pipeline sql"}
    assert run <= checked, sorted(run - checked)

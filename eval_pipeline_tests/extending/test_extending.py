"""A grading check and an agent kind added from the tests, one file each, used by a suite end to end through `eval-pipeline test`."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline.agents import register_agent_kind, unregister_agent_kind
from eval_pipeline.grading import register_check, unregister_check
from eval_pipeline_tests.agents.tiny_suite import DAY, write_case, write_suite
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli, run_cli_subprocess
from eval_pipeline_tests.extending import toy_agent_kind, toy_check

pytestmark = pytest.mark.slow

PRODUCT = Path(__file__).resolve().parents[2] / "eval_pipeline"
MODEL = "echo:revenue-is-42"


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy check and agent kind registered in this process, as a notebook would."""
    monkeypatch.setenv(toy_agent_kind.TOKEN_VARIABLE, "t0ken")
    register_check(toy_check.ReplyMentions())
    register_agent_kind(toy_agent_kind.EchoKind())
    yield
    unregister_check(toy_check.ReplyMentions.name)
    unregister_agent_kind(toy_agent_kind.EchoKind.prefix)


def toy_suite(root: Path) -> Path:
    return write_suite(
        root,
        cases={
            "says_42": {"prompt": "What is the revenue?", "reply_mentions": [42, "Revenue"]},
            "says_17": {"prompt": "What was it last year?", "reply_mentions": [17]},
        },
        dbt=False,
    )


def files_of(*extensions: object) -> set[Path]:
    """The files an extension took: the module defining it, and any product module that
    names it (there should be none)."""
    files = {Path(inspect.getfile(type(extension))) for extension in extensions}
    for extension in extensions:
        name = getattr(extension, "name", None) or f"{extension.prefix}:"  # type: ignore[attr-defined]
        files |= {
            path for path in PRODUCT.rglob("*.py") if name in path.read_text(encoding="utf-8")
        }
    return files


def test_a_check_and_an_agent_kind_each_take_one_file():
    assert files_of(toy_check.ReplyMentions()) == {Path(toy_check.__file__)}
    assert files_of(toy_agent_kind.EchoKind()) == {Path(toy_agent_kind.__file__)}


def test_a_suite_grades_the_toy_agent_with_the_toy_check_through_the_cli(registered, tmp_path):
    root = toy_suite(tmp_path / "suite")
    result = run_cli("test", "--date", str(DAY), "-m", MODEL, "--format", "json", cwd=root)
    no_traceback(result)
    assert result.returncode == 1, result.stderr  # one test fails: the agent was wrong
    grades = {r["name"]: r for r in json.loads(result.stdout)["results"]}
    assert grades["says_42"]["passed"] is True
    assert grades["says_42"]["details"]["checks"] == [
        {
            "kind": "reply_mentions",
            "status": "passed",
            "message": "the reply mentions every word",
            "details": {},
            "judge": None,
        }
    ]
    assert grades["says_17"]["passed"] is False
    assert grades["says_17"]["message"] == "the reply does not mention 17"
    assert {g["model"] for g in grades.values()} == {MODEL}


def test_the_toy_checks_mistakes_are_named_with_file_field_and_line(registered, tmp_path):
    root = toy_suite(tmp_path / "suite")
    write_case(root, "bad", {"prompt": "q", "reply_mentions": [True]})
    result = run_cli("test", "--date", str(DAY), "-m", MODEL, cwd=root)
    no_traceback(result)
    assert result.returncode == 2
    assert "cases/bad.yml:4: reply_mentions[0]: expected a word or a number, got True" in (
        result.stderr
    )


def test_the_toy_kinds_id_and_secret_are_checked_before_anything_runs(registered, tmp_path):
    root = toy_suite(tmp_path / "suite")
    wrong = run_cli("test", "--date", str(DAY), "-m", "echo:Not_Words", cwd=root)
    no_traceback(wrong)
    assert wrong.returncode == 2
    assert "expected echo:<words-joined-by-dashes>" in wrong.stderr
    os.environ.pop(toy_agent_kind.TOKEN_VARIABLE)  # the fixture's monkeypatch puts it back
    unsigned = run_cli("test", "--date", str(DAY), "-m", MODEL, cwd=root)
    no_traceback(unsigned)
    assert unsigned.returncode == 2
    assert f"environment variable {toy_agent_kind.TOKEN_VARIABLE} is not set" in unsigned.stderr
    assert not (root / "outputs").exists()


def with_kind_settings(root: Path, settings: object) -> None:
    """`agent_kinds:` added to the suite's eval_config.yaml, as a user writes it."""
    config = root / "eval_config.yaml"
    block = yaml.safe_dump({"agent_kinds": settings}, sort_keys=False)
    config.write_text(config.read_text(encoding="utf-8") + block, encoding="utf-8")


def test_the_toy_kinds_own_settings_change_its_answers_and_rerun_its_tests(registered, tmp_path):
    root = toy_suite(tmp_path / "suite")
    args = ("test", "--date", str(DAY), "-m", MODEL, "--format", "json")
    assert run_cli(*args, cwd=root).returncode == 1  # says_17 fails: "revenue is 42"
    with_kind_settings(root, {"echo": {"also": "and 17 last year"}})
    result = run_cli(*args, cwd=root)
    no_traceback(result)
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert all(r["passed"] for r in document["results"])
    assert document["executed_runs"] == 2  # what answers changed: no stored run reused


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"echo": {"also": 17}}, "agent_kinds.echo: also: expected words"),
        ({"echo": ["also"]}, "agent_kinds.echo: expected a mapping with one key"),
        (
            {"ekko": {}},
            "agent_kinds.ekko: no agent kind has the prefix 'ekko'; the kinds "
            "installed: echo, http, nao, replay",
        ),
        ({"http": {"retries": 2}}, "agent_kinds.http: an external agent takes no settings"),
    ],
)
def test_kind_settings_no_kind_takes_are_refused_before_anything_runs(
    registered, tmp_path, settings, said
):
    root = toy_suite(tmp_path / "suite")
    with_kind_settings(root, settings)
    result = run_cli("test", "--date", str(DAY), "-m", MODEL, cwd=root)
    no_traceback(result)
    assert result.returncode == 2
    assert "eval_config.yaml:" in result.stderr and said in result.stderr, result.stderr
    assert not (root / "outputs").exists()


def installed_package(folder: Path, entry_points: str) -> dict[str, str]:
    """A package's metadata with `entry_points`, as pip would install it, and the
    environment a process sees it in."""
    info = folder / "toy_extensions-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-extensions\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    paths = [str(folder), str(Path(__file__).resolve().parents[2])]
    return {**cli_env(), "PYTHONPATH": os.pathsep.join(paths), toy_agent_kind.TOKEN_VARIABLE: "t"}


def test_a_package_adds_both_through_entry_points(tmp_path):
    env = installed_package(
        tmp_path / "site",
        "[eval_pipeline.checks]\n"
        "reply_mentions = eval_pipeline_tests.extending.toy_check:ReplyMentions\n"
        "[eval_pipeline.agents]\n"
        "echo = eval_pipeline_tests.extending.toy_agent_kind:EchoKind\n",
    )
    root = toy_suite(tmp_path / "suite")
    result = run_cli_subprocess("test", "--date", str(DAY), "-m", MODEL, cwd=root, env=env)
    no_traceback(result)
    assert result.returncode == 1, result.stderr
    assert "the reply does not mention 17" in result.stdout


def test_an_entry_point_that_fails_to_load_is_named(tmp_path):
    env = installed_package(
        tmp_path / "site", "[eval_pipeline.checks]\nbroken = toy_nowhere.checks:Broken\n"
    )
    root = toy_suite(tmp_path / "suite")
    result = run_cli_subprocess("test", "--date", str(DAY), "-m", "replay:none", cwd=root, env=env)
    no_traceback(result)
    assert result.returncode == 2
    assert (
        "entry point broken = 'toy_nowhere.checks:Broken' (eval_pipeline.checks): cannot be "
        "loaded: ModuleNotFoundError: No module named 'toy_nowhere'"
    ) in result.stderr


def test_an_edit_of_an_added_check_regrades_the_stored_runs(tmp_path):
    """An added check's code is grading code: edited, the next command regrades every stored
    run with it (no agent run again), as an edit of a built-in check would."""
    site = tmp_path / "site"
    env = installed_package(
        site,
        "[eval_pipeline.checks]\nreply_mentions = site_check:ReplyMentions\n"
        "[eval_pipeline.agents]\necho = eval_pipeline_tests.extending.toy_agent_kind:EchoKind\n",
    )
    module = site / "site_check.py"
    module.write_text(Path(toy_check.__file__).read_text(encoding="utf-8"), encoding="utf-8")
    root = toy_suite(tmp_path / "suite")
    args = ("test", "--date", str(DAY), "-m", MODEL)

    first = run_cli_subprocess(*args, cwd=root, env=env)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "the reply does not mention 17" in first.stdout
    unchanged = run_cli_subprocess(*args, cwd=root, env=env)
    assert "nothing changed since the last evaluation" in unchanged.stdout, unchanged.stdout

    module.write_text(
        module.read_text(encoding="utf-8").replace("the reply does not mention", "missing:"),
        encoding="utf-8",
    )
    edited = run_cli_subprocess(*args, cwd=root, env=env)
    no_traceback(edited)
    assert edited.returncode == 1, edited.stdout + edited.stderr
    assert "missing: 17" in edited.stdout
    assert "regraded: grading code changed — 2 run(s)" in edited.stdout, edited.stdout
    assert "No agent run executed" in edited.stdout, edited.stdout

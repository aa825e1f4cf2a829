"""A process reads a suite's files once while they stay the same, and a run launched with them refuses an edit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval_pipeline.pipeline import (
    SuiteChanged,
    load_suite_once,
    remember_suite,
    suite_files_digest,
)
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.suite.nao_project import write_nao_project


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "suite", cases={"q0": "Revenue?", "q1": "Orders?"}, dbt=False)


def _edit(root: Path, name: str = "q0", prompt: str = "Revenue, please?") -> None:
    path = root / "cases" / f"{name}.yml"
    case = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**case, "prompt": prompt}, sort_keys=False))


def test_an_unchanged_suite_is_parsed_once_and_an_edited_one_again(root: Path, loads) -> None:
    first = load_suite_once(root)
    assert load_suite_once(root) is first
    assert len(loads) == 1
    _edit(root)
    edited = load_suite_once(root)
    assert len(loads) == 2
    assert edited.case("q0").prompt != first.case("q0").prompt


def test_a_handed_in_suite_is_the_one_read_and_is_not_parsed_again(root: Path, loads) -> None:
    suite = load_suite(root)
    digest = remember_suite(suite)
    assert load_suite_once(root, launched=digest) is suite
    assert loads == []


@pytest.mark.parametrize(
    "edit",
    [
        lambda root: _edit(root),
        lambda root: (root / "cases" / "q1.yml").unlink(),
        lambda root: (root / "cases" / "q2.yml").write_text("prompt: Customers?\n"),
        lambda root: (root / "eval_config.yaml").write_text(
            (root / "eval_config.yaml").read_text() + "\n# a comment is an edit too\n"
        ),
    ],
    ids=["edited", "removed", "added", "config"],
)
def test_a_run_refuses_files_that_changed_since_its_launch(root: Path, edit) -> None:
    digest = remember_suite(load_suite(root))
    edit(root)
    assert suite_files_digest(root, "cases") != digest
    with pytest.raises(SuiteChanged) as raised:
        load_suite_once(root, launched=digest)
    message = str(raised.value)
    assert str(root.resolve()) in message and message.endswith("run again")


def test_files_beside_the_tests_are_not_the_suite(root: Path) -> None:
    # The results files and the store live in the suite folder too; writing them is no edit.
    digest = suite_files_digest(root, "cases")
    (root / "cases" / "outputs").mkdir()
    (root / "cases" / "outputs" / "results.yml").write_text("{}")
    (root / "notes.yml").write_text("not a test\n")
    assert suite_files_digest(root, "cases") == digest


def test_rules_added_to_a_nao_project_are_read_by_a_process_that_loaded_it_before(tmp_path):
    """A long-lived process (the daemon, a code server) evaluating a nao project: RULES.md
    written after its first evaluation is in the agent's context of the next."""
    root = write_nao_project(tmp_path / "shop", base_url="http://127.0.0.1:9/v1")
    rules = root / "RULES.md"
    rules.unlink(missing_ok=True)
    assert load_suite_once(root).config.context == ()
    rules.write_text("Amounts are in EUR.\n")
    assert load_suite_once(root).config.context == (rules,)
    rules.unlink()
    assert load_suite_once(root).config.context == ()

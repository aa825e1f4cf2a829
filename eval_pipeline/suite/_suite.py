"""A suite folder: reads its config in the format it has, discovers and loads its test files,
and selects cases by name or folder."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from eval_pipeline.suite._case import Case
from eval_pipeline.suite._config import CONFIG_FILE, SuiteConfig, with_environment_providers
from eval_pipeline.suite._config_file import read_config_file
from eval_pipeline.suite._context import context_size_problems
from eval_pipeline.suite._databases import unknown_database_problems
from eval_pipeline.suite._errors import Problem, SelectionError, SuiteError
from eval_pipeline.suite._nao import NAO_CONFIG_FILE, NAO_TESTS_DIR, is_nao_project, load_nao_config
from eval_pipeline.suite._parse import parse_case
from eval_pipeline.suite._yaml import load_yaml, yaml_error_line, yaml_error_summary

CASES_DIR = "cases"
SKIPPED_DIRS = frozenset({"outputs"})
DEFAULT_SUITE_DIR = "tests_suite"


@dataclass(frozen=True)
class Suite:
    """A loaded, valid suite: its configuration and its cases in a stable order."""

    root: Path
    config: SuiteConfig
    cases: tuple[Case, ...]

    @property
    def cases_dir(self) -> Path:
        return self.root / self.config.cases_dirname

    @property
    def hash(self) -> str:
        """Changes when any case's verdict-relevant content changes, or a case comes or goes."""
        digest = hashlib.sha256()
        for case in sorted(self.cases, key=lambda c: c.name):
            digest.update(f"{case.name}\0{case.content_hash}\n".encode())
        return digest.hexdigest()[:16]

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise SelectionError([name], [c.name for c in self.cases])

    def select(self, selection: str | Sequence[str] | None) -> list[Case]:
        """The cases a selection names; all cases when the selection is empty.

        Args:
            selection: test names, file stems or subfolders of `cases/`, as one
                comma-separated string or a list of them (each may hold commas too).
                Order is kept, surrounding spaces and repeats are ignored, and a
                folder selects every case below it.

        Raises:
            SelectionError: an entry matches nothing; the message lists the tests.
        """
        tokens = _tokens(selection)
        if not tokens:
            return list(self.cases)
        chosen: dict[str, Case] = {}
        unknown: list[str] = []
        for token in tokens:
            matches = _matching(self.cases, token)
            if not matches:
                unknown.append(token)
            for case in matches:
                chosen.setdefault(case.name, case)
        if unknown:
            raise SelectionError(unknown, [c.name for c in self.cases])
        return list(chosen.values())


def _tokens(selection: str | Sequence[str] | None) -> list[str]:
    if selection is None:
        return []
    parts = [selection] if isinstance(selection, str) else list(selection)
    tokens: list[str] = []
    for part in parts:
        for token in part.split(","):
            token = token.strip().strip("/")
            if token and token not in tokens:
                tokens.append(token)
    return tokens


def _matching(cases: Iterable[Case], token: str) -> list[Case]:
    by_name = [c for c in cases if c.name == token]
    if by_name:
        return by_name
    by_stem = [c for c in cases if c.stem == token or c.relative_path == token]
    if by_stem:
        return by_stem
    return [c for c in cases if c.folder == token or c.folder.startswith(token + "/")]


def suite_marker(folder: Path) -> Path | None:
    """What makes `folder` a suite: its `eval_config.yaml`, its `cases/`, or the
    `nao_config.yaml` of a nao project; None when it is no suite."""
    for marker in (folder / CONFIG_FILE, folder / CASES_DIR):
        if marker.exists():
            return marker
    return folder / NAO_CONFIG_FILE if is_nao_project(folder) else None


def find_suite_root(start: Path | None = None) -> Path:
    """The suite to use when none is given: the current folder if it is one (`suite_marker`),
    else its `tests_suite/` folder (the sample suite of a clone of this repository)."""
    here = (start or Path.cwd()).resolve()
    return here if suite_marker(here) is not None else here / DEFAULT_SUITE_DIR


def load_config(root: Path) -> SuiteConfig:
    """Read `<root>/eval_config.yaml` (a missing file means all defaults), or a nao project's
    `nao_config.yaml` when `root` is one. `openai` and `anthropic` need no `llm.providers`
    entry: without one they read `ENVIRONMENT_KEYS` (see `with_environment_providers`).

    Raises:
        SuiteError: listing every problem in the file.
    """
    root = root.resolve()
    if is_nao_project(root):
        config = load_nao_config(root)
    else:
        config = with_environment_providers(read_config_file(root), source=CONFIG_FILE)
    if problems := context_size_problems(config):
        raise SuiteError(problems)
    return config


def discover_case_files(cases_dir: Path) -> list[Path]:
    """Every `*.yml` / `*.yaml` below `cases_dir`, skipping `outputs/` and hidden folders."""
    found = []
    for path in cases_dir.rglob("*"):
        parts = path.relative_to(cases_dir).parts
        if any(p in SKIPPED_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        if path.is_file() and path.suffix in (".yml", ".yaml") and not path.name.startswith("."):
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(cases_dir).as_posix())


def load_cases(root: Path, cases_dirname: str = CASES_DIR) -> tuple[list[Case], list[Problem]]:
    """Load every test file of a suite, returning the valid cases and all problems found.

    Args:
        cases_dirname: the folder below `root` holding the test files: `cases` in our
            layout, `tests` in a nao project.
    """
    cases_dir = root / cases_dirname
    cases: list[Case] = []
    problems: list[Problem] = []
    if not cases_dir.is_dir():
        return [], [
            Problem(
                str(cases_dir),
                None,
                f"the suite has no {cases_dirname}/ folder; create it and add test files",
            )
        ]
    for path in discover_case_files(cases_dir):
        relative = path.relative_to(cases_dir).as_posix()
        source = f"{cases_dirname}/{relative}"
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            problems.append(
                Problem(source, None, yaml_error_summary(error), yaml_error_line(error))
            )
            continue
        except UnicodeDecodeError:
            problems.append(Problem(source, None, "the file is not UTF-8 text"))
            continue
        case, found = parse_case(data, path=path, relative_path=relative, source=source)
        problems.extend(found)
        if case is not None:
            cases.append(case)
    problems.extend(_duplicate_names(cases, cases_dirname))
    return cases, problems


def _duplicate_names(cases: Sequence[Case], cases_dirname: str) -> list[Problem]:
    first: dict[str, Case] = {}
    problems = []
    for case in cases:
        if case.name in first:
            problems.append(
                Problem(
                    f"{cases_dirname}/{case.relative_path}",
                    "name",
                    f"test name {case.name!r} is already used by {cases_dirname}/{first[case.name].relative_path}; "
                    "names must be unique in the suite",
                )
            )
        else:
            first[case.name] = case
    return problems


def load_suite(root: Path | str | None = None) -> Suite:
    """Load a suite folder: its `eval_config.yaml` and every test file under `cases/`, or a
    nao project: its `nao_config.yaml` and every test file under `tests/` (but `tests/outputs/`).

    Raises:
        SuiteError: listing every problem in every file; a suite with any invalid
            file does not run.
    """
    root = Path(root).resolve() if root is not None else find_suite_root()
    if not root.is_dir():
        raise SuiteError(
            [
                Problem(
                    str(root),
                    None,
                    "suite folder not found; pass --suite DIR, or start one here with "
                    "`eval-pipeline init`",
                )
            ]
        )
    problems: list[Problem] = []
    try:
        config = load_config(root)
    except SuiteError as error:
        problems.extend(error.problems)
        config = SuiteConfig(
            root=root, cases_dirname=NAO_TESTS_DIR if is_nao_project(root) else CASES_DIR
        )
    cases, case_problems = load_cases(root, config.cases_dirname)
    problems.extend(case_problems)
    problems.extend(unknown_database_problems(cases, config.databases, CASES_DIR))
    if problems:
        raise SuiteError(problems)
    if config.test.semantic is not None:
        # The default joins the case itself, so it is part of the content hash: turning it
        # on or changing it regrades, like editing the test would.
        default = config.test.semantic
        cases = [c if c.semantic else replace(c, semantic=default) for c in cases]
    return Suite(root=root, config=config, cases=tuple(cases))

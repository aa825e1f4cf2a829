"""The suite an evaluation's stages read: loaded once per process while its files stay the same.

Every stage of an evaluation reads the suite (its test files and `eval_config.yaml`). Reading
them again for each stage would parse the same files a dozen times, and an edit made while
the stages run would have some stages grade the old tests and others the new. So a process
keeps the suite it loaded beside a digest of the files it came from (`suite_files_digest`),
and loads again only when they change; a command that loaded the suite already hands it in
(`remember_suite`), and its stages refuse to go on once the files no longer hash to what
they were launched with (`SuiteChanged`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from eval_pipeline.suite import (
    CONFIG_FILE,
    NAO_CONFIG_FILE,
    NAO_RULES_FILE,
    Suite,
    discover_case_files,
    load_suite,
)

__all__ = ["SuiteChanged", "load_suite_once", "remember_suite", "suite_files_digest"]

# Per suite folder: the digest of its files and the suite loaded from them. One entry per
# folder, so a long-lived process (the daemon, a test run) keeps only the latest of each.
_LOADED: dict[Path, tuple[str, Suite]] = {}


class SuiteChanged(RuntimeError):
    """The suite's files changed while an evaluation was reading them: grading on would mix
    the tests as they were with the tests as they are."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            f"the suite folder {root} changed during the evaluation (its test files or "
            f"{CONFIG_FILE} no longer match the suite this run was launched with); run again"
        )
        self.root = root


def suite_files_digest(root: Path, cases_dirname: str) -> str:
    """A digest of the files `load_suite` reads in `root`: its configuration files and every
    test file below `cases_dirname` (their paths and bytes), and of which are absent; and
    whether a nao project's RULES.md is there (the suite's context then lists it: a process
    that kept the suite loaded would otherwise run on without the rules added since)."""
    digest = hashlib.sha256()
    configs = [root / CONFIG_FILE, root / NAO_CONFIG_FILE]
    for path in [*configs, *discover_case_files(root / cases_dirname)]:
        try:
            content = path.read_bytes()
        except FileNotFoundError:  # absent (or gone since listed): the digest says so
            content = None
        name = path.relative_to(root).as_posix()
        size = -1 if content is None else len(content)
        digest.update(f"{name}\0{size}\0".encode())
        digest.update(content or b"")
    digest.update(f"{NAO_RULES_FILE}\0{(root / NAO_RULES_FILE).is_file()}\0".encode())
    return digest.hexdigest()


def remember_suite(suite: Suite) -> str:
    """Keep an already loaded suite for the stages this process runs; returns the digest of
    its files as they are now (the caller loaded it moments before), what those stages
    check (`load_suite_once(launched=…)`)."""
    digest = suite_files_digest(suite.root, suite.config.cases_dirname)
    _LOADED[suite.root] = (digest, suite)
    return digest


def holds_suite(root: Path) -> bool:
    """Whether this process keeps a loaded suite of `root` (`remember_suite`)."""
    return root.resolve() in _LOADED


def load_suite_once(root: Path, *, launched: str | None = None) -> Suite:
    """The suite in `root`, loaded (`load_suite`) only when this process holds none for its
    files as they are now.

    Args:
        launched: the digest of the files the caller's run was launched with
            (`remember_suite`); None: whatever the files hold.

    Raises:
        SuiteChanged: the files no longer hash to `launched`.
        SuiteError: a test file or the configuration is invalid.
    """
    root = root.resolve()
    held = _LOADED.get(root)
    if held is not None:
        digest, suite = held
        now = suite_files_digest(root, suite.config.cases_dirname)
        if launched is not None and now != launched:
            raise SuiteChanged(root)
        if now == digest:
            return suite
    suite = load_suite(root)
    digest = suite_files_digest(root, suite.config.cases_dirname)
    if launched is not None and digest != launched:
        raise SuiteChanged(root)
    _LOADED[root] = (digest, suite)
    return suite

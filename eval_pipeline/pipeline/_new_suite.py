"""A new suite in a folder, from a warehouse: its files written, then loaded and its reference run as `test` will."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from eval_pipeline.agents import require_models
from eval_pipeline.grading import ReferenceResult
from eval_pipeline.pipeline._references import references_by_database
from eval_pipeline.sandbox import SandboxLimits
from eval_pipeline.suite import (
    CASES_DIR,
    CONFIG_FILE,
    DEFAULT_DATABASE_NAME,
    DUCKDB,
    ENGINES,
    RULES_FILE,
    DatabaseConfig,
    Problem,
    StarterModels,
    StarterWarehouse,
    SuiteError,
    Templated,
    engine_named,
    load_suite,
    starter_files,
    starter_gitignore,
    starter_test_path,
    suite_marker,
)
from eval_pipeline.warehouses import WarehouseError, connect, describe_tables

__all__ = ["URL_VARIABLE", "NewSuite", "start_suite"]

#: The variable a server URL with a password is read from (the password stays out of the file).
URL_VARIABLE = "WAREHOUSE_URL"
_DUCKDB_SUFFIXES = (".duckdb", ".ddb")


@dataclass(frozen=True)
class NewSuite:
    """What `start_suite` wrote and checked.

    Args:
        root: the suite folder.
        written: each file written, relative to `root`, with what was done (`wrote`, `added to`,
            `kept`).
        database: the configured warehouse, as the loader read it back.
        tables: the tables of its default schema.
        test_file: the first test, relative to `root`.
        reference: its reference result, run read-only on the warehouse.
        url_variable: the environment variable the server URL is read from, when it holds a
            password (None: the URL or path is in the file).
        models: the models the suite evaluates by default, and their judge.
    """

    root: Path
    written: tuple[tuple[str, str], ...]
    database: DatabaseConfig
    tables: tuple[str, ...]
    test_file: str
    reference: ReferenceResult
    url_variable: str | None
    models: StarterModels


def _refuse(path: Path | str, message: str) -> SuiteError:
    return SuiteError([Problem(str(path), None, message)], headline="no suite was started")


def start_suite(
    folder: Path,
    *,
    warehouse: Path | None = None,
    url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> NewSuite:
    """Start a suite in `folder` (created if missing) on a DuckDB file or a server.

    The first test asks for the row count of the warehouse's first table. Before reporting
    success the suite is loaded with the loader every command uses, its models are checked and
    its reference SQL is run read-only through the same sandbox as `eval-pipeline test`; if any
    of that fails, the files written are removed again.

    Args:
        folder: the new suite's folder; one that is a suite already is refused.
        warehouse: a DuckDB file. None with no `url`: the one DuckDB file in `folder`.
        url: a server's URL (PostgreSQL, MySQL/MariaDB, any engine with URL schemes); one with
            a password is written as
            `{{ env('WAREHOUSE_URL') }}`, never with the password.
        environ: where API keys are looked for to choose the default models; None: os.environ.

    Raises:
        SuiteError: the folder is a suite already, no warehouse was found or it cannot be
            opened, it has no table, or the written suite does not load or run its reference.
    """
    root = folder.resolve()
    _check_free(root)
    spec, url_variable = (
        _server(url) if url is not None else _duckdb(root, _duckdb_file(root, warehouse))
    )
    models = _models(os.environ if environ is None else environ)
    with _url_in_environment(url_variable, url):
        tables = _tables(_as_database(spec, root))
        if not tables:
            raise _refuse(spec.location, "the warehouse has no table in its default schema to test")
        written = _write(root, spec, models, tables)
        try:
            suite = load_suite(root)
            require_models(suite.config, suite.config.test.models, source=CONFIG_FILE)
            limits = SandboxLimits.from_config(suite.config.limits)
            (reference,) = references_by_database(suite.config, suite.cases, limits)
        except BaseException:
            _undo(root, written)
            raise
    test_file = starter_test_path(tables[0])
    if reference.error is not None:
        _undo(root, written)
        raise _refuse(test_file, f"the reference SQL failed on the warehouse: {reference.error}")
    database = suite.config.database()
    assert database is not None  # the config written names one
    return NewSuite(
        root=root,
        written=tuple((action, name) for name, action, _ in written),
        database=database,
        tables=tuple(tables),
        test_file=test_file,
        reference=reference,
        url_variable=url_variable,
        models=models,
    )


def _check_free(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise _refuse(root, "is a file; give a folder for the new suite")
    if (marker := suite_marker(root)) is not None:
        raise _refuse(
            marker,
            "already exists: this folder is a suite, and init never overwrites one "
            "(edit it, or give init another folder)",
        )


def _duckdb_file(root: Path, given: Path | None) -> Path:
    if given is not None:
        path = given.expanduser().resolve()
        if not path.is_file():
            raise _refuse(given, "no such DuckDB file")
        return path
    found = (
        sorted(p for p in root.iterdir() if p.suffix in _DUCKDB_SUFFIXES and p.is_file())
        if root.is_dir()
        else []
    )
    if len(found) == 1:
        return found[0]
    what = (
        f"several DuckDB files ({', '.join(p.name for p in found)})"
        if found
        else "no DuckDB file (*.duckdb)"
    )
    raise _refuse(
        root,
        f"{what} here; name the warehouse: --warehouse FILE, or --url postgresql://… / mysql://…",
    )


def _duckdb(root: Path, path: Path) -> tuple[StarterWarehouse, None]:
    # Inside the suite: relative, so suite and file move together; elsewhere: where it is.
    location = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return StarterWarehouse(DUCKDB, location), None


def _server(url: str) -> tuple[StarterWarehouse, str | None]:
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError as error:
        raise _refuse("--url", f"not a URL: {error}") from None
    scheme = parts.scheme.split("+", 1)[0].lower()
    servers = [engine for engine in ENGINES.all() if engine.on_server]
    kind = next((e.name for e in servers if scheme in e.url_schemes), None)
    if kind is None or not parts.hostname:
        raise _refuse(
            "--url",
            "expected "
            + " or ".join(f"{e.url_schemes[0]}://user:password@host:port/dbname" for e in servers),
        )
    if password:
        return StarterWarehouse(kind, "{{ env('" + URL_VARIABLE + "') }}"), URL_VARIABLE
    return StarterWarehouse(kind, url), None


@contextlib.contextmanager
def _url_in_environment(variable: str | None, url: str | None) -> Iterator[None]:
    """The URL given on the command line under the variable the written config reads, while
    init checks the suite (the user exports it for later commands; init prints how)."""
    if variable is None or url is None:
        yield
        return
    before = os.environ.get(variable)
    os.environ[variable] = url
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


def _as_database(spec: StarterWarehouse, root: Path) -> DatabaseConfig:
    """The warehouse as the written config will configure it (before the config exists)."""
    if not engine_named(spec.type).on_server:
        path = Path(spec.location)
        return DatabaseConfig(
            DEFAULT_DATABASE_NAME, spec.type, path=path if path.is_absolute() else root / path
        )
    template = Templated(spec.location, f"{CONFIG_FILE} databases[0].url", secret="url_password")
    return DatabaseConfig(DEFAULT_DATABASE_NAME, spec.type, url=template)


def _tables(database: DatabaseConfig) -> list[str]:
    try:
        connection = connect(database)
    except WarehouseError as error:
        raise _refuse(database.path or "--url", f"cannot open the warehouse: {error}") from None
    try:
        return sorted(table.name for table in describe_tables(connection))
    except WarehouseError as error:
        raise _refuse(database.path or "--url", f"cannot list its tables: {error}") from None
    finally:
        connection.close()


def _models(environ: Mapping[str, str]) -> StarterModels:
    """OpenAI's models, unless only an Anthropic key is in the environment."""
    if environ.get("ANTHROPIC_API_KEY") and not environ.get("OPENAI_API_KEY"):
        return StarterModels(("anthropic:claude-sonnet-4-5",), "anthropic:claude-haiku-4-5")
    return StarterModels(("openai:gpt-4.1",), "openai:gpt-4.1-mini")


def _write(
    root: Path, spec: StarterWarehouse, models: StarterModels, tables: list[str]
) -> list[tuple[str, str, str | None]]:
    """Write the suite's files; each as (name, what was done, its text before or None)."""
    files = starter_files(spec, models, tables)
    done: list[tuple[str, str, str | None]] = []
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / CASES_DIR).mkdir()
        for name, text in files.items():
            if name == RULES_FILE and (root / name).exists():
                done.append((name, "kept", None))  # the user's own rules: context as they are
                continue
            (root / name).write_text(text, encoding="utf-8")
            done.append((name, "wrote", None))
        ignore = root / ".gitignore"
        before = ignore.read_text(encoding="utf-8") if ignore.exists() else None
        if added := starter_gitignore(before or ""):
            with ignore.open("a", encoding="utf-8") as handle:
                handle.write(added)
            done.append((".gitignore", "added to" if before else "wrote", before))
    except BaseException:
        _undo(root, done)
        raise
    return done


def _undo(root: Path, written: list[tuple[str, str, str | None]]) -> None:
    """Remove what `_write` wrote (a `.gitignore` gets its old text back)."""
    for name, action, before in reversed(written):
        path = root / name
        with contextlib.suppress(OSError):
            if action == "added to" and before is not None:
                path.write_text(before, encoding="utf-8")
            elif action == "wrote":
                path.unlink()
    with contextlib.suppress(OSError):
        (root / CASES_DIR).rmdir()

"""Reads the `databases:` list of eval_config.yaml, and finds tests naming no configured database."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from eval_pipeline.suite._config import (
    CONFIG_FILE,
    DatabaseConfig,
    Templated,
    config_path,
)
from eval_pipeline.suite._engines import ENGINES, Engine, listed
from eval_pipeline.suite._errors import Problem
from eval_pipeline.suite._parse import FieldReader

__all__ = ["read_databases", "unknown_database_problems"]

_KEYS = ("name", "type", "path", "url", "schema", "dbt_project", "allow_privileged_role")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def read_databases(r: FieldReader, data: dict, root: Path) -> tuple[DatabaseConfig, ...]:
    """Parse the `databases:` list; every problem is reported on `r` with its line."""
    databases: list[DatabaseConfig] = []
    seen: dict[str, str] = {}
    items = data["databases"]
    entries = r.items(data, "databases", "databases")
    if not entries and isinstance(items, list):
        r.problem("databases", "the list is empty; configure at least one database")
    for i, _item in entries:
        where = f"databases[{i}]"
        block = r.mapping(items, i, where, _KEYS)
        if block is None:
            continue
        name = r.text(block, "name", f"{where}.name", required=True)
        kind = block.get("type")
        engine = ENGINES.get(kind) if isinstance(kind, str) else None
        if engine is None:
            r.problem(
                f"{where}.type", f"expected {_types()}, got {kind!r}", r.line_of(block, "type")
            )
            continue
        if name is not None and not _NAME.fullmatch(name):
            r.problem(
                f"{where}.name",
                "use letters, digits, '_', '.' or '-' (it names the database in results)",
                r.line_of(block, "name"),
            )
            continue
        if name is not None and name in seen:
            r.problem(
                f"{where}.name",
                f"database name {name!r} is already used by {seen[name]}; give each its own",
                r.line_of(block, "name"),
            )
            continue
        database = _database(r, block, where, root, name, engine)
        if database is not None:
            database = dataclasses.replace(
                database, declared=(r.source, where, r.line_of(items, i))
            )
        if database is not None and name is not None:
            seen[name] = where
            databases.append(database)
    return tuple(databases)


def _database(
    r: FieldReader,
    block: dict,
    where: str,
    root: Path,
    name: str | None,
    engine: Engine,
) -> DatabaseConfig | None:
    kind = engine.name
    schema = r.text(block, "schema", f"{where}.schema") if "schema" in block else None
    dbt = r.text(block, "dbt_project", f"{where}.dbt_project") if "dbt_project" in block else None
    dbt_path = config_path(root, dbt) if dbt else None
    if dbt_path is not None and not (dbt_path / "dbt_project.yml").exists():
        r.problem(
            f"{where}.dbt_project",
            f"no dbt_project.yml in {dbt_path}",
            r.line_of(block, "dbt_project"),
        )
    allow_privileged = False
    if "allow_privileged_role" in block:
        allow_privileged = bool(
            r.boolean(block, "allow_privileged_role", f"{where}.allow_privileged_role")
        )
    if not engine.on_server:
        if "allow_privileged_role" in block:
            servers = ", ".join(e.name for e in ENGINES.all() if e.on_server)
            r.problem(
                f"{where}.allow_privileged_role",
                f"only a server database ({servers}) has a role to check",
                r.line_of(block, "allow_privileged_role"),
            )
        if "url" in block:
            r.problem(
                f"{where}.url", f"a {kind} database has a path, not a url", r.line_of(block, "url")
            )
        path = r.text(block, "path", f"{where}.path", required=True)
        if path is None or name is None:
            return None
        return DatabaseConfig(
            name, kind, path=config_path(root, path), schema=schema, dbt_project=dbt_path
        )
    if "path" in block:
        r.problem(
            f"{where}.path", f"a {kind} database has a url, not a path", r.line_of(block, "path")
        )
    url = r.text(block, "url", f"{where}.url", required=True)
    if url is None or name is None:
        return None
    if not url.lstrip().startswith("{{"):
        scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
        if scheme not in engine.url_schemes:
            expected = " or ".join(f"{s}://" for s in engine.url_schemes)
            r.problem(
                f"{where}.url",
                f"a {kind} url starts with {expected} (user:password@host:port/dbname); "
                "write the password as {{ env('NAME') }} rather than in this file",
                r.line_of(block, "url"),
            )
            return None
    template = Templated(url, f"{CONFIG_FILE} {where}.url", secret="url_password")
    return DatabaseConfig(
        name,
        kind,
        url=template,
        schema=schema,
        dbt_project=dbt_path,
        allow_privileged_role=allow_privileged,
    )


def _types() -> str:
    """The `type:` values a database may give: "'duckdb', 'postgres' or 'mysql' (MySQL and MariaDB)"."""
    return listed(
        [f"'{e.name}'" + (f" {e.type_note}" if e.type_note else "") for e in ENGINES.all()]
    )


def unknown_database_problems(
    cases: list, databases: tuple[DatabaseConfig, ...], cases_dir: str = "cases"
) -> list[Problem]:
    """A problem for each test whose `database:` names no configured database, with its line."""
    if not databases:
        return []  # nothing configured to check against (an external-agent-only suite)
    names = [d.name for d in databases]
    problems = []
    for case in cases:
        if case.database is None or case.database in names:
            continue
        problems.append(
            Problem(
                f"{cases_dir}/{case.relative_path}",
                "database",
                f"no database named {case.database!r} is configured; "
                f"configured: {', '.join(names)} (eval_config.yaml `databases:`)",
                _line_of_key(case.path, "database"),
            )
        )
    return problems


def _line_of_key(path: Path, key: str) -> int | None:
    """The line of a top-level `key:` in a test file (cases keep values, not lines)."""
    pattern = re.compile(rf"^{re.escape(key)}\s*:")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((i for i, line in enumerate(lines, 1) if pattern.match(line)), None)

"""The warehouses a suite queries: the `databases:` list of eval_config.yaml (or one `warehouse:`)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlsplit

from eval_pipeline.suite._errors import Problem, SuiteError
from eval_pipeline.suite._parse import FieldReader
from eval_pipeline.suite._secrets import register_secret

if TYPE_CHECKING:
    from eval_pipeline.suite._config import Templated

__all__ = ["DEFAULT_DATABASE_NAME", "DatabaseConfig", "read_databases", "unknown_database_problems"]

DatabaseType = Literal["duckdb", "postgres", "mysql"]
#: The name of the one database a `warehouse:` block configures (a test may say `database: warehouse`).
DEFAULT_DATABASE_NAME = "warehouse"
_KEYS = ("name", "type", "path", "url", "schema", "dbt_project", "allow_privileged_role")
_SCHEMES = {
    "postgres": ("postgresql", "postgres"),
    "mysql": ("mysql", "mariadb"),
}
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class DatabaseConfig:
    """One warehouse: a DuckDB file (`path`) or a server (`url`, resolved only when connecting).

    Args:
        name: what a test's `database:` names; unique in the suite.
        type: `duckdb`, `postgres` (PostgreSQL) or `mysql` (MySQL and MariaDB).
        path: the DuckDB file (duckdb only), resolved against the suite folder.
        url: the server's URL as written, e.g. `{{ env('FINANCE_PG_URL') }}`; its password is
            a secret, so the value is resolved when a connection is made, never stored.
        schema: the schema (PostgreSQL) queries and schema descriptions default to.
        dbt_project: a dbt project whose docs describe the tables to the agent.
        allow_privileged_role: connect even when the server's role can write, create, read
            the server's files or end other sessions (refused otherwise, with the lines
            that create a read-only role); warned about on every run.
        declared: where the user wrote it, as a problem names it: the file, the entry and
            its line (`nao_config.yaml`, `databases[0]`, 4), so a message about the database
            points at the file the user has.
    """

    name: str
    type: DatabaseType
    path: Path | None = None
    url: Templated | None = None
    schema: str | None = None
    dbt_project: Path | None = None
    allow_privileged_role: bool = False
    declared: tuple[str, str, int | None] = ("eval_config.yaml", "databases", None)

    def problem(self, message: str, key: str | None = None) -> Problem:
        """`message` about this database (its `key`, e.g. `path`), where it was declared."""
        source, field, line = self.declared
        return Problem(source, f"{field}.{key}" if key else field, message, line)

    @property
    def is_server(self) -> bool:
        return self.type != "duckdb"

    def resolve_url(self) -> str:
        """The server URL with its environment variables filled in; its password is registered
        as a secret (only the password: the rest of a URL is ordinary text, such as a host or
        database name that also appears in queries)."""
        if self.url is None:
            raise ValueError(f"database {self.name!r} has no url")
        url = self.url.resolve()
        with contextlib.suppress(ValueError):
            if password := urlsplit(url).password:
                register_secret(password)
                register_secret(unquote(password))  # as the driver sends it
        return url

    @property
    def fingerprint(self) -> str:
        """Changes when the definition of this database changes: its name, type, file, schema,
        or the server its URL reaches (host, port, user, database name; never the password,
        so a rotated password is the same database). The reference results' data version."""
        where: str = str(self.path) if self.path is not None else ""
        if self.url is not None:
            try:
                parts = urlsplit(self.resolve_url())
                host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
                where = f"{parts.scheme}://{parts.username}@{host}{parts.path}?{parts.query}"
            except (ValueError, SuiteError):  # an unset variable (MissingSecret)
                where = self.url.template  # unresolvable here: the definition as written
        text = "\n".join([self.name, self.type, where, self.schema or "", str(self.dbt_project)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_databases(
    r: FieldReader, data: dict, root: Path, templated: type[Templated]
) -> tuple[DatabaseConfig, ...]:
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
        if kind not in ("duckdb", "postgres", "mysql"):
            r.problem(
                f"{where}.type",
                f"expected 'duckdb', 'postgres' or 'mysql' (MySQL and MariaDB), got {kind!r}",
                r.line_of(block, "type"),
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
        database = _database(r, block, where, root, name, kind, templated)
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
    kind: DatabaseType,
    templated: type[Templated],
) -> DatabaseConfig | None:
    from eval_pipeline.suite._config import CONFIG_FILE, config_path

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
    if kind == "duckdb":
        if "allow_privileged_role" in block:
            r.problem(
                f"{where}.allow_privileged_role",
                "only a server database (postgres, mysql) has a role to check",
                r.line_of(block, "allow_privileged_role"),
            )
        if "url" in block:
            r.problem(
                f"{where}.url", "a duckdb database has a path, not a url", r.line_of(block, "url")
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
        if scheme not in _SCHEMES[kind]:
            expected = " or ".join(f"{s}://" for s in _SCHEMES[kind])
            r.problem(
                f"{where}.url",
                f"a {kind} url starts with {expected} (user:password@host:port/dbname); "
                "write the password as {{ env('NAME') }} rather than in this file",
                r.line_of(block, "url"),
            )
            return None
    template = templated(url, f"{CONFIG_FILE} {where}.url", secret="url_password")
    return DatabaseConfig(
        name,
        kind,
        url=template,
        schema=schema,
        dbt_project=dbt_path,
        allow_privileged_role=allow_privileged,
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

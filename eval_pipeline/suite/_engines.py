"""Warehouse engines: the one interface each engine's adapter fills, and the registry that finds it by `type:`.

An engine is one `Engine` value: what a configuration calls it, how a database of it is
written down, how a session on one is opened and which statements the sandbox lets through.
The suite reads `type:` against the registry, the warehouses open sessions through
`Engine.connect`, the sandbox checks statements with `Engine.reading_statement`; none of
them names an engine. The built-in adapters (`eval_pipeline/sandbox/_*_engine.py`) are
named here the way an entry point names its object and imported on first use: they hold
the engine's connection and its statement rules, so they sit above the sandbox, which this
layer may not import. A package outside this repository adds one through the
`eval_pipeline.engines` entry-point group (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eval_pipeline.suite._errors import Problem
from eval_pipeline.suite._registry import ExtensionError, Registry

__all__ = [
    "DUCKDB",
    "ENGINES",
    "ENGINES_GROUP",
    "Engine",
    "engine_named",
    "listed",
    "register_engine",
    "unregister_engine",
]

#: The entry-point group a package adds warehouse engines to.
ENGINES_GROUP = "eval_pipeline.engines"
#: The engine of a `warehouse:` block: the file a dbt project builds, the only kind of
#: database whose copies the semantic check's variants are.
DUCKDB = "duckdb"


@dataclass(frozen=True)
class Engine:
    """One warehouse engine, as every layer asks it (docs/extending.md walks through one).

    Typed loosely where a value belongs to a layer above this one (a session, a sandbox):
    `warehouses.connect` checks what `connect` returns.

    Args:
        name: the `type:` a configuration writes (`databases[].type`), kept in
            `DatabaseConfig.type` and in messages ("postgres").
        label: the engine as the model is told it and messages name it ("PostgreSQL").
        dialect: sqlglot's name for its SQL, which orders results, checks a reference's
            health and classifies failures.
        connect: opens one session on a database and returns a `warehouses.WarehouseConnection`
            (a read-only transaction streaming Arrow batches). It raises
            `warehouses.ConnectionFailed` naming the database when the server is unreachable,
            refuses the login or lacks the schema, and refuses a role that can do more than
            read (`warehouses.judge_privileges`).
        catalogue_sql: one query of the current schema's columns, as rows of (table, column,
            type, table comment, column comment) ordered by table and column position: the
            schema the built-in agent is shown and `init` lists.
        reading_statement: the sandbox's rules for the engine: given the statement and the
            session's `warehouses.StableCallables`, the text to send once the engine's own
            reading of it finds one read calling only what a read needs; raises
            `sandbox.ForbiddenStatement` or `sandbox.QueryFailed` otherwise. None: the
            sandbox runs nothing on the engine (it never borrows another engine's rules).
        own_sandbox: (database, `sandbox.SandboxLimits`) → a sandbox of the engine's own, in
            place of the server sandbox over `connect` and `reading_statement` (DuckDB runs
            in this process, locked down as a whole).
        url_schemes: a server engine's URL schemes (`postgresql`, `postgres`), the first the
            one a URL is built with; empty for a file engine, whose databases give a `path:`.
        type_note: what follows the name where the types are listed ("(MySQL and MariaDB)").
        nao_type: the `type:` of nao_config.yaml read as this engine (None: none).
        default_port: the port of a nao database that gives none (server engines).
        nao_url: a server engine's URL from the fields of a nao database of it (nao's own
            names, every value but `name` and `type` as text: percent-encoded, an
            `{{ env() }}` kept as a template for the connection to resolve); raises
            `KeyError(field)` for a field it needs that is not there. None: nao's `host`,
            `port`, `user`, `password` and `database` (PostgreSQL's and MySQL's).
        identifier_quote: the character its SQL quotes a name with (a starter test's table).
        run_note: (database) → a line `eval-pipeline test` prints before the runs for each
            database of the engine the tests use, or None: what a user should know before
            paying, such as the Snowflake warehouse whose credits the queries spend. Never
            connects; None: nothing is printed.
        cost_preview: (database, the reference SQL of the tests about to run on it) → one
            line `eval-pipeline test` prints before the first run: what the references will
            cost where the engine can tell it without running them (BigQuery's dry run, the
            bytes one query may bill). None: the engine tells nothing before running.
    """

    name: str
    label: str
    dialect: str
    connect: Callable[[Any], Any]
    catalogue_sql: str
    reading_statement: Callable[[str, Any], str] | None = None
    own_sandbox: Callable[[Any, Any], Any] | None = None
    url_schemes: tuple[str, ...] = ()
    type_note: str = ""
    nao_type: str | None = None
    default_port: int | None = None
    nao_url: Callable[[dict[str, str]], str] | None = None
    identifier_quote: str = '"'
    run_note: Callable[[Any], str | None] | None = None
    cost_preview: Callable[[Any, list[str]], str | None] | None = None

    @property
    def on_server(self) -> bool:
        """A server's engine (its databases give a `url:`), not a file's (`path:`)."""
        return bool(self.url_schemes)

    def quoted(self, identifier: str) -> str:
        """`identifier` quoted as the engine's SQL quotes a name, its quote character doubled."""
        quote = self.identifier_quote
        return quote + identifier.replace(quote, quote * 2) + quote


ENGINES: Registry[Engine] = Registry(
    ENGINES_GROUP,
    {
        # The order `type:` lists them in.
        "duckdb": "eval_pipeline.sandbox._duckdb_engine:ENGINE",
        "postgres": "eval_pipeline.sandbox._postgres_engine:ENGINE",
        "mysql": "eval_pipeline.sandbox._mysql_engine:ENGINE",
        "snowflake": "eval_pipeline.sandbox._snowflake_engine:ENGINE",
        "clickhouse": "eval_pipeline.sandbox._clickhouse_engine:ENGINE",
        "bigquery": "eval_pipeline.sandbox._bigquery_engine:ENGINE",
    },
    name_of=lambda engine: engine.name,
    accepts=lambda engine: isinstance(engine, Engine),
)


def register_engine(engine: Engine) -> Engine:
    """Add a warehouse engine in this process (as a package does with an entry point in the
    `eval_pipeline.engines` group); `unregister_engine(engine.name)` removes it."""
    return ENGINES.register(engine)


def unregister_engine(name: str) -> None:
    ENGINES.unregister(name)


def engine_named(name: str) -> Engine:
    """The engine a `type:` names.

    Raises:
        ExtensionError: no engine of that name is installed (a database read before its
            package was uninstalled); the message lists those that are.
    """
    engine = ENGINES.get(name)
    if engine is None:
        known = ", ".join(e.name for e in ENGINES.all())
        raise ExtensionError(
            [
                Problem(
                    ENGINES_GROUP,
                    None,
                    f"no warehouse engine {name!r} is installed (installed: {known}); install "
                    "the package that adds it, or use one of these",
                )
            ],
            headline=f"unknown warehouse engine {name!r}; nothing was run",
        )
    return engine


def listed(names: list[str]) -> str:
    """`a, b or c`: names as a message lists choices."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"

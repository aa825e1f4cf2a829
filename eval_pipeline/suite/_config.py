"""What a suite can say: its configuration's values and their defaults, whichever file says them.

Each format has its reader returning these values: `_config_file` reads `eval_config.yaml`
(with `_databases` for its `databases:` list), `_nao` a nao project's `nao_config.yaml`.
The `limits:` and `store:` blocks, which only our file has, keep their values beside their
readers (`_limits`, `_store_config`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote, urlsplit

from eval_pipeline.suite._case import Semantic, Tolerance
from eval_pipeline.suite._errors import Problem, SuiteError
from eval_pipeline.suite._limits import Limits
from eval_pipeline.suite._secrets import register_secret, url_passwords
from eval_pipeline.suite._store_config import StoreConfig

#: Our own file; the defaults below name it as the place a value was written.
CONFIG_FILE = "eval_config.yaml"
#: The providers a suite reaches with no `llm.providers` entry, and the environment variable
#: each reads its key from (the variables nao and the vendors' own clients read).
ENVIRONMENT_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_ENV_CALL = re.compile(r"{{\s*env\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\)\s*}}")

ThresholdMode = Literal["average", "all"]
#: A database's engine, as its `type:` names it (`Engine.name`: duckdb, postgres, mysql or
#: an engine a package adds, suite/_engines.py).
DatabaseType = str
#: The name of the one database a `warehouse:` block configures (a test may say `database: warehouse`).
DEFAULT_DATABASE_NAME = "warehouse"
# A recording is a file directly in the suite's recordings/ folder, named without any path.
_RECORDING_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def recording_name_problem(model_id: str) -> str | None:
    """Why a `replay:<name>` model id cannot name a recording, or None when it can (or is no replay).

    A name with a path in it (`replay:../../x`) would read a file outside the suite.
    """
    prefix, colon, name = model_id.partition(":")
    if prefix != "replay" or not colon or _RECORDING_NAME.fullmatch(name):
        return None
    return (
        f"{model_id!r}: a recording name is a plain file name in recordings/ "
        "(letters, digits, '.', '_', '-'; no path)"
    )


class MissingSecret(SuiteError):
    """A config value names an environment variable that is not set."""


@dataclass(frozen=True)
class Templated:
    """A config string that may read environment variables with `{{ env('NAME') }}`.

    The template is what is kept and shown; the value is resolved only when a request is
    made, so secrets never sit in config objects, logs, reports or the store.
    """

    template: str
    where: str = CONFIG_FILE
    #: "url_password" for a database URL: only its password is secret, since its host and
    #: database name also appear in ordinary text (queries, messages) that must stay readable.
    secret: Literal["whole", "url_password"] = "whole"
    #: Each variable's value percent-encoded, for a URL built from parts (a nao database's
    #: `password: {{ env('X') }}`), so a password holding '@' or '/' stays one URL part.
    percent_encode: bool = False

    def __repr__(self) -> str:
        return f"Templated({self.template!r})"

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(_ENV_CALL.findall(self.template))

    def resolve(self, environ: dict[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        missing = [name for name in self.env_names if not env.get(name)]
        if missing:
            raise MissingSecret(
                [
                    Problem(
                        self.where,
                        None,
                        f"environment variable {name} is not set; export it before running",
                    )
                    for name in missing
                ],
                headline="a secret the configuration needs is missing",
            )
        if self.percent_encode:
            resolved = _ENV_CALL.sub(lambda m: quote(env[m.group(1)], safe=""), self.template)
        else:
            resolved = _ENV_CALL.sub(lambda m: env[m.group(1)], self.template)
        # From now on no piece of a secret is stored, printed or logged: every value read
        # from the environment, or of a URL only its passwords (its user, host and database
        # are names that queries and messages must keep readable).
        secrets = (
            [env[name] for name in self.env_names]
            if self.secret == "whole"
            else url_passwords(resolved)
        )
        for secret in secrets:
            register_secret(secret)
        return resolved


@dataclass(frozen=True)
class ModelCosts:
    """USD per million tokens; a price that is not given stays unknown (None), never 0."""

    input_no_cache: float | None = None
    input_cache_read: float | None = None
    output: float | None = None


@dataclass(frozen=True)
class ModelConfig:
    id: str
    costs: ModelCosts | None = None
    max_tokens: int | None = None  # wins over the provider's
    #: Request fields sent with each of its completions (`settings:`), sorted by name.
    settings: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ProviderConfig:
    """An LLM provider: `openai`, `anthropic`, or any name with a `base_url` (OpenAI-compatible)."""

    name: str
    protocol: Literal["openai", "anthropic"]
    api_key: Templated | None = None
    base_url: str | None = None
    models: tuple[ModelConfig, ...] = ()
    timeout_s: float = 120.0
    max_tokens: int | None = None  # cap on each completion; None: the caller's default
    #: False for `openai` / `anthropic` with no `llm.providers` entry (`with_environment_providers`).
    declared: bool = True

    def model(self, model_id: str) -> ModelConfig | None:
        return next((m for m in self.models if m.id == model_id), None)

    def max_tokens_for(self, model_id: str) -> int | None:
        """The configured `max_tokens` of a model: its own, else the provider's, else None."""
        model = self.model(model_id)
        return model.max_tokens if model and model.max_tokens else self.max_tokens

    def settings_for(self, model_id: str) -> dict[str, Any]:
        """The request settings configured for a model (temperature, ...); empty when none."""
        model = self.model(model_id)
        return dict(model.settings) if model else {}


@dataclass(frozen=True)
class AgentConfig:
    """An external agent under test, spoken to over the HTTP protocol of docs/agent-protocol.md."""

    name: str
    url: str
    headers: dict[str, Templated] = field(default_factory=dict)
    timeout_s: float = 300.0
    #: What the agent says it is (its release); when set, it stands for the agent in its runs'
    #: identity instead of the URL, so moving the agent re-runs nothing and a new release does.
    version: str | None = None


@dataclass(frozen=True)
class KindSettings:
    """An added agent kind's own block in `eval_config.yaml` (`agent_kinds.<prefix>`), as written:
    plain YAML data that the kind checks (`AgentKind.settings_problem`) and reads."""

    data: Any
    line: int | None = None


@dataclass(frozen=True)
class NaoBackendConfig:
    """The `nao_backend:` block: the running nao backend that `nao:<provider>:<model_id>` runs go to.

    Args:
        url: its chat server, e.g. `http://localhost:5005`; None: the `BACKEND_URL`
            environment variable, else nao's default, as `nao test` does.
        timeout_s: one run on the backend (its agent loop and verification), sign-in apart.
    """

    url: str | None = None
    timeout_s: float = 600.0


BudgetQuestionKind = Literal["compare", "pass_rate"]


@dataclass(frozen=True)
class AttemptBudget:
    """An attempt budget (`--budget`, `--budget-usd`, or `test: budget:`): attempts go where
    the answer is uncertain instead of `k` to every test.

    Args:
        runs: runs in all, over every model (each test once per model comes first).
        usd: dollars in all, with known prices; the first round runs whatever it costs.
        question: what the attempts decide: `compare` (which model is better, each pair) or
            `pass_rate` (each model's pass rate within `width`); None: `compare` with
            several models, else `pass_rate`.
        alpha: the error rate of all decisions together (anytime-valid).
        width: the `pass_rate` question's target width of each model's interval.
        configured_in: the configuration file that set the budget (`eval_config.yaml`);
            None when the command line did. Only says where a message points the user:
            the same budget asks the same wherever it was given.
    """

    runs: int | None = None
    usd: float | None = None
    question: BudgetQuestionKind | None = None
    alpha: float = 0.05
    width: float = 0.2
    configured_in: str | None = field(default=None, compare=False)

    def given_as(self, key: Literal["runs", "usd"]) -> tuple[str, str | None]:
        """Where the budget's `key` was given, as a `Problem`'s source and field:
        (`eval_config.yaml`, `test.budget.usd`), or (`--budget-usd`, None)."""
        if self.configured_in is not None:
            return self.configured_in, f"test.budget.{key}"
        return ("--budget" if key == "runs" else "--budget-usd"), None

    def question_for(self, models: int) -> BudgetQuestionKind:
        """The question the budget answers for an evaluation of `models` models."""
        return self.question or ("compare" if models > 1 else "pass_rate")


@dataclass(frozen=True)
class TestDefaults:
    """The `test:` block: what a run uses when the command line does not say otherwise."""

    __test__ = False  # not a pytest class, despite the name

    models: tuple[str, ...] = ("openai:gpt-4.1",)
    threads: int = 1
    k: int = 1
    comparison: Tolerance = field(default_factory=Tolerance)
    judge_model: str | None = None
    extraction: Literal["llm", "last_query"] = "llm"
    # Ask the judge about runs a check no judge decides has already failed (data, assertions):
    # off, their judged checks are `skipped`, which saves a judge call per failed run.
    judge_failed_runs: bool = False
    schedule: str = "0 6 * * *"
    min_accuracy: float | None = None
    threshold_mode: ThresholdMode = "average"
    # Runs that ended as `error` count as not passed instead of making the evaluation
    # incomplete (exit 3, the `min_accuracy` asset check failed).
    allow_errors: bool = False
    semantic: Semantic | None = None  # the semantic check of tests that set none (off: None)
    # `regression: {significant_only: true}`: no_regression fails only on a drop the paired
    # test between the two days calls significant; default: any regressed test.
    regression_significant_only: bool = False
    # The first day of the daily partitions (None: the day of the suite's first evaluation).
    start_date: date | None = None
    # `budget:` / `budget_usd:`: an attempt budget in place of `k` (None: `k` attempts).
    budget: AttemptBudget | None = None


@dataclass(frozen=True)
class WarehouseConfig:
    type: Literal["duckdb"]
    path: Path
    dbt_project: Path | None = None

    @property
    def to_build(self) -> bool:
        """Its dbt project builds the warehouse file, and the file is not there yet (the
        suite's first run)."""
        return self.dbt_project is not None and not self.path.exists()


@dataclass(frozen=True)
class DatabaseConfig:
    """One warehouse: a file (`path`, DuckDB's) or a server (`url`, resolved only when connecting).

    Args:
        name: what a test's `database:` names; unique in the suite.
        type: its engine: `duckdb`, `postgres` (PostgreSQL), `mysql` (MySQL and MariaDB), or
            one a package adds (suite/_engines.py).
        path: the database file (a file engine's, such as duckdb), resolved against the
            suite folder.
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
    declared: tuple[str, str, int | None] = (CONFIG_FILE, "databases", None)

    def problem(self, message: str, key: str | None = None) -> Problem:
        """`message` about this database (its `key`, e.g. `path`), where it was declared."""
        source, entry, line = self.declared
        return Problem(source, f"{entry}.{key}" if key else entry, message, line)

    @property
    def is_server(self) -> bool:
        """Reached at a URL (a server engine's database), not a file."""
        return self.url is not None

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


@dataclass(frozen=True)
class UsageConfig:
    """`usage:`: where the daily usage assets read production conversations (docs/usage.md)."""

    #: Globs of trace or JSONL files, relative to the suite folder.
    traces: tuple[str, ...] = ()
    #: `otel` or `jsonl`; None: each file's first record tells.
    source: str | None = None
    #: The cron of the `usage_daily` schedule (it starts stopped).
    schedule: str = "0 7 * * *"
    #: Mask e-mail addresses, phone and card numbers in what is stored.
    mask_text: bool = True
    #: Ask `test.judge_model` whether each correction found in a user's words is one (a
    #: judge call each, cached); those it says are not leave the recommendations.
    confirm_corrections: bool = False


@dataclass(frozen=True)
class SuiteConfig:
    """The whole configuration, with every relative path resolved against the suite folder."""

    root: Path
    test: TestDefaults = field(default_factory=TestDefaults)
    warehouse: WarehouseConfig | None = None
    #: Every warehouse, the default (a test without `database:`) first; `warehouse:` is one.
    databases: tuple[DatabaseConfig, ...] = ()
    context: tuple[Path, ...] = ()
    #: A folder of warehouse docs written by a sync tool (nao's `databases/`, from `nao sync`):
    #: its Markdown files are part of the agent's context, each shown with its table.
    synced_docs: Path | None = None
    providers: tuple[ProviderConfig, ...] = ()
    agents: tuple[AgentConfig, ...] = ()
    nao_backend: NaoBackendConfig = field(default_factory=NaoBackendConfig)
    #: Each agent kind's own settings by its prefix (`agent_kinds:`), for kinds a package adds.
    agent_kinds: dict[str, KindSettings] = field(default_factory=dict)
    state_dir: Path | None = None
    limits: Limits = field(default_factory=Limits)
    store: StoreConfig | None = None  # None: the results stay in state_path (the default)
    usage: UsageConfig = field(default_factory=UsageConfig)
    # Where test files and results files live: `cases/` and `outputs/` in our layout,
    # `tests/` and `tests/outputs/` in a nao project (suite/_nao.py).
    cases_dirname: str = "cases"
    results_folder: Path | None = None
    # Our model id → the spelling the user wrote (nao's `openaiCompatible/vllm:qwen3`), for display.
    model_labels: dict[str, str] = field(default_factory=dict)

    @property
    def state_path(self) -> Path:
        return self.state_dir or self.root / ".eval"

    @property
    def results_dir(self) -> Path:
        """The folder results files (`results_*.json`) are written to and read from."""
        return self.results_folder or self.root / "outputs"

    def model_label(self, model_id: str) -> str:
        return self.model_labels.get(model_id, model_id)

    def database(self, name: str | None = None) -> DatabaseConfig | None:
        """The database a test's `database:` names; the first configured one for None."""
        if name is None:
            return self.databases[0] if self.databases else None
        return next((d for d in self.databases if d.name == name), None)

    def provider(self, name: str) -> ProviderConfig | None:
        return next((p for p in self.providers if p.name == name), None)

    def agent(self, name: str) -> AgentConfig | None:
        return next((a for a in self.agents if a.name == name), None)


def first_duckdb_warehouse(databases: tuple[DatabaseConfig, ...]) -> WarehouseConfig | None:
    """The `warehouse` of a config with these databases: the first one when it is a DuckDB
    file, for the code that knows only one warehouse; None otherwise."""
    first = databases[0] if databases else None
    if first is None or first.type != "duckdb" or first.path is None:
        return None
    return WarehouseConfig(type="duckdb", path=first.path, dbt_project=first.dbt_project)


def config_path(root: Path, written: str) -> Path:
    """A path as a config file writes it, made absolute: `~` expanded, and a relative one
    taken from the suite folder `root`, as every path of a `SuiteConfig` is."""
    path = Path(os.path.expanduser(str(written)))
    return path if path.is_absolute() else (root / path).resolve()


def with_environment_providers(config: SuiteConfig, *, source: str) -> SuiteConfig:
    """The config with a provider for `openai` and for `anthropic` when it declares none, its
    key read from the environment (`ENVIRONMENT_KEYS`) when a request needs it.

    So `-m openai:gpt-4.1` works with `OPENAI_API_KEY` set and no `llm` block, as in nao; a
    declared provider of that name (another key, a `base_url`, prices) is kept as it is.

    Args:
        source: the configuration file, for the message about an unset key.
    """
    implicit = tuple(
        ProviderConfig(
            name=name,
            protocol=name,  # type: ignore[arg-type]  # the two names are the two protocols
            api_key=Templated(
                "{{ env('" + variable + "') }}", f"{source} (no llm.providers entry for {name})"
            ),
            declared=False,
        )
        for name, variable in ENVIRONMENT_KEYS.items()
        if config.provider(name) is None
    )
    for provider in implicit:  # known as secrets from now on, as declared keys are
        with contextlib.suppress(MissingSecret):  # reported when a request needs it
            provider.api_key.resolve()  # type: ignore[union-attr]
    return dataclasses.replace(config, providers=config.providers + implicit)

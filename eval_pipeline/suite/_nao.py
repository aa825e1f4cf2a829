"""A nao project (`nao_config.yaml` + `tests/`) read as a suite: its config → `SuiteConfig`."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from eval_pipeline.suite._case import Tolerance
from eval_pipeline.suite._config import (
    CONFIG_FILE,
    ENVIRONMENT_KEYS,
    DatabaseConfig,
    ModelConfig,
    ModelCosts,
    ProviderConfig,
    SuiteConfig,
    Templated,
    TestDefaults,
    config_path,
    first_duckdb_warehouse,
    with_environment_providers,
)
from eval_pipeline.suite._config_file import read_config_file
from eval_pipeline.suite._engines import ENGINES, Engine, listed
from eval_pipeline.suite._errors import Problem, SuiteError
from eval_pipeline.suite._model_settings import read_model_settings
from eval_pipeline.suite._parse import MAX_ATTEMPTS, FieldReader
from eval_pipeline.suite._yaml import load_yaml, yaml_error_line, yaml_error_summary

NAO_CONFIG_FILE = "nao_config.yaml"
NAO_TESTS_DIR = "tests"
NAO_RESULTS_DIR = "outputs"  # below tests/, where `nao test` writes results_*.json
NAO_RULES_FILE = "RULES.md"  # nao's main context file, beside nao_config.yaml
NAO_SYNCED_DOCS = "databases"  # where `nao sync` writes each table's docs

# nao declares an OpenAI-compatible endpoint as a provider `openaiCompatible/<name>` (or
# `provider: openaiCompatible` with `name: <name>`), and reads the kind in any of these spellings.
_COMPATIBLE = "openaiCompatible"
_COMPATIBLE_SPELLINGS = frozenset(
    {_COMPATIBLE, "openai-compatible", "openai_compatible", "openaicompatible"}
)
# nao substitutes `{{ env('X') }}` and `${{ env('X') }}` in the raw text before parsing YAML, so
# an unquoted `api_key: {{ env('X') }}` is valid there. We swap each one for a plain token, parse,
# then turn tokens back into templates: line numbers stay right and no secret is read here.
_NAO_ENV_CALL = re.compile(r"\$?{{\s*env\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\)\s*}}")
_ENV_TOKEN = re.compile(r"__nao_env_([A-Za-z_][A-Za-z0-9_]*)__")
_ENV_TOKEN_SPLIT = re.compile(r"(__nao_env_[A-Za-z_][A-Za-z0-9_]*__)")
_BUILT_IN = tuple(ENVIRONMENT_KEYS)  # declared without an api_key, they read these variables


def is_nao_project(root: Path) -> bool:
    """True when `root` holds `nao_config.yaml` and is not laid out as our own suite.

    A folder with `nao_config.yaml` and `tests/` is a nao project; one with only
    `nao_config.yaml` is too (so the error names `tests/`), unless it has our `cases/`.
    """
    if not (root / NAO_CONFIG_FILE).is_file():
        return False
    return (root / NAO_TESTS_DIR).is_dir() or not (root / "cases").is_dir()


def to_model_id(spelling: str) -> str:
    """A model as nao writes it → our `provider:model_id` (the one place that maps them).

    `openaiCompatible/vllm:qwen3` → `vllm:qwen3` (in any of nao's spellings of the kind, the
    name as nao normalises it); `openai:gpt-4.1` stays as it is.
    """
    provider, colon, model = spelling.partition(":")
    kind, slash, name = provider.partition("/")
    if colon and slash and kind in _COMPATIBLE_SPELLINGS:
        return f"{_endpoint_name(name)}:{model}"
    return spelling


def _endpoint_name(name: str) -> str:
    """An endpoint's name as nao keeps it: lower case, each run of other characters a dash."""
    return re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-") or name


def load_nao_config(root: Path) -> SuiteConfig:
    """Read a nao project's `nao_config.yaml` (plus an `eval_config.yaml` beside it, if any).

    Only the parts a test run needs are read: `databases`, `llm.providers` and `test`; nao's
    other keys (repos, slack, mcp, ...) are left alone. Keys of our own `eval_config.yaml`
    (agents, context, limits, judge_model, ...) may sit beside it; where both set the same
    `test` key, ours wins.

    Raises:
        SuiteError: every problem found, each naming nao_config.yaml and its line.
    """
    root = root.resolve()
    data = _read(root / NAO_CONFIG_FILE)
    r = FieldReader(NAO_CONFIG_FILE)
    if not isinstance(data, dict):
        r.problem(None, "the configuration must be a mapping")
        raise SuiteError(r.problems)
    databases = _databases(r, data, root) if data.get("databases") is not None else ()
    providers, unsupported = _providers(r, data) if data.get("llm") is not None else ((), {})
    spellings = _models(r, data)
    test = _test_block(r, data, spellings)
    _check_test_providers(r, data, providers, unsupported, spellings)
    if r.problems:
        raise SuiteError(r.problems, headline=f"{len(r.problems)} problem(s) in {NAO_CONFIG_FILE}")
    ours = read_config_file(root) if (root / CONFIG_FILE).is_file() else None
    config = SuiteConfig(
        root=root,
        test=test,
        warehouse=first_duckdb_warehouse(databases),
        databases=databases,
        providers=providers,
        # What nao's agent reads: RULES.md, and the docs `nao sync` wrote.
        context=_rules(root),
        synced_docs=root / NAO_SYNCED_DOCS,
        cases_dirname=NAO_TESTS_DIR,
        results_folder=root / NAO_TESTS_DIR / NAO_RESULTS_DIR,
        model_labels={to_model_id(s): s for s in spellings if to_model_id(s) != s},
    )
    # A test's `database:` names one of nao's databases (the first is the default).
    config = _merged(config, ours) if ours is not None else config
    # openai / anthropic undeclared in both files read nao's key variables.
    return with_environment_providers(config, source=NAO_CONFIG_FILE)


def _rules(root: Path) -> tuple[Path, ...]:
    """RULES.md, when the project has one (nao puts it in its agent's system prompt)."""
    path = root / NAO_RULES_FILE
    if not path.is_file():
        return ()
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        problem = f"is not UTF-8 text (byte {error.start}); save it as UTF-8"
        raise SuiteError([Problem(NAO_RULES_FILE, None, problem)]) from None
    return (path,)


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SuiteError(
            [Problem(NAO_CONFIG_FILE, None, f"is not UTF-8 text (byte {error.start})")]
        ) from None
    try:
        data = load_yaml(_NAO_ENV_CALL.sub(lambda m: f"__nao_env_{m.group(1)}__", text))
    except yaml.YAMLError as error:
        raise SuiteError(
            [Problem(NAO_CONFIG_FILE, None, yaml_error_summary(error), yaml_error_line(error))]
        ) from None
    except RecursionError:
        raise SuiteError(
            [Problem(NAO_CONFIG_FILE, None, "is nested too deeply to be a configuration")]
        ) from None
    return {} if data is None else data


def _template(value: str) -> str:
    """Our `{{ env('X') }}` form of a string read with nao's env calls swapped for tokens."""
    return _ENV_TOKEN.sub(lambda m: "{{ env('" + m.group(1) + "') }}", value)


#: A nao server database's connection fields (nao's own names, with `port`, `password` and
#: `schema_name`; cli/nao_core/config/databases/), made into a URL of its engine's scheme.
_SERVER_KEYS = ("host", "database", "user")


def _databases(r: FieldReader, data: dict, root: Path) -> tuple[DatabaseConfig, ...]:
    """nao's `databases` list → ours, each by the engine whose `nao_type` its `type` is: files
    such as DuckDB's (path relative to root) and servers such as PostgreSQL or MySQL (their
    connection fields made into a URL, each `{{ env() }}` kept a template until a connection
    is made, so no password is read here)."""
    databases: list[DatabaseConfig] = []
    seen: set[str] = set()
    for i, item in r.items(data, "databases", "databases"):
        where = f"databases[{i}]"
        line = r.line_of(data["databases"], i)
        if not isinstance(item, dict):
            r.problem(where, "expected a mapping with `name` and `type`", line)
            continue
        kind = item.get("type")
        engine = next((e for e in ENGINES.all() if kind is not None and e.nao_type == kind), None)
        if engine is None:
            usable = listed([e.nao_type for e in ENGINES.all() if e.nao_type is not None])
            r.problem(
                f"{where}.type",
                f"{kind!r} databases are not supported yet; use {usable}",
                r.line_of(item, "type") or line,
            )
            continue
        name = r.text(item, "name", f"{where}.name", required=True)
        if name is None:
            continue
        if name in seen:
            r.problem(f"{where}.name", f"database name {name!r} is used twice", line)
            continue
        database = (
            _server_database(r, item, where, name, engine)
            if engine.on_server
            else _file_database(r, item, where, root, name, engine)
        )
        if database is not None:
            seen.add(name)
            databases.append(dataclasses.replace(database, declared=(NAO_CONFIG_FILE, where, line)))
    return tuple(databases)


def _file_database(
    r: FieldReader, item: dict, where: str, root: Path, name: str, engine: Engine
) -> DatabaseConfig | None:
    path = r.text(item, "path", f"{where}.path", required=True)
    if path is None:
        return None
    if path == ":memory:":
        r.problem(f"{where}.path", "an in-memory database holds no data to test against")
        return None
    return DatabaseConfig(name, engine.name, path=config_path(root, _template(path)))


def _server_database(
    r: FieldReader, item: dict, where: str, name: str, engine: Engine
) -> DatabaseConfig | None:
    if engine.nao_url is not None:
        return _own_server_database(r, item, where, name, engine, engine.nao_url)
    scheme, default_port = engine.url_schemes[0], engine.default_port
    parts = {key: r.text(item, key, f"{where}.{key}", required=True) for key in _SERVER_KEYS}
    password = r.text(item, "password", f"{where}.password") if "password" in item else ""
    port = item.get("port", default_port)
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, str) and _ENV_TOKEN.fullmatch(port):
        port = _template(port)  # read from the environment when connecting
    elif not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        r.problem(f"{where}.port", f"expected a port number, got {port!r}", r.line_of(item, "port"))
        return None
    if None in parts.values() or password is None:
        return None
    schema = (
        r.text(item, "schema_name", f"{where}.schema_name") if item.get("schema_name") else None
    )

    login = _piece(parts["user"]) + (f":{_piece(password)}" if password else "")
    url = f"{scheme}://{login}@{_piece(parts['host'])}:{port}/{_piece(parts['database'])}"
    template = Templated(
        url, f"{NAO_CONFIG_FILE} {where}", secret="url_password", percent_encode=True
    )
    return DatabaseConfig(name, engine.name, url=template, schema=schema)


def _piece(value: str) -> str:
    """A written part of a URL percent-encoded; its `{{ env() }}` parts when resolved."""
    return "".join(
        _template(chunk) if _ENV_TOKEN.fullmatch(chunk) else quote(chunk, safe="")
        for chunk in _ENV_TOKEN_SPLIT.split(value)
        if chunk
    )


#: Fields every nao database has that name no connection: its name, its type, and the globs
#: of tables nao's sync reads (`include`, `exclude`: lists, which no URL holds).
_NAO_BASE_FIELDS = frozenset({"name", "type", "include", "exclude"})


def _own_server_database(
    r: FieldReader,
    item: dict,
    where: str,
    name: str,
    engine: Engine,
    nao_url: Callable[[dict[str, str]], str],
) -> DatabaseConfig | None:
    """A nao database of an engine that reads nao's fields its own way (`Engine.nao_url`)."""
    fields: dict[str, str] = {}
    for key, value in item.items():
        if key in _NAO_BASE_FIELDS or value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, dict | list):
            # nao takes some fields as mappings (a service account's credentials, filters):
            # their JSON text, for the engine to read or refuse (never shown: it may be a key).
            value = json.dumps(value)
        elif not isinstance(value, str | int | float):
            kind = type(value).__name__
            r.problem(f"{where}.{key}", f"expected text, got a {kind}", r.line_of(item, key))
            return None
        fields[str(key)] = _piece(str(value))
    try:
        url = nao_url(fields)
    except KeyError as missing:
        field = missing.args[0]
        line = r.line_of(item, "type")
        r.problem(f"{where}.{field}", f"required for {engine.label} databases", line)
        return None
    except ValueError as wrong:
        r.problem(where, str(wrong), r.line_of(item, "type"))
        return None
    template = Templated(
        url, f"{NAO_CONFIG_FILE} {where}", secret="url_password", percent_encode=True
    )
    schema = (
        r.text(item, "schema_name", f"{where}.schema_name") if item.get("schema_name") else None
    )
    return DatabaseConfig(name, engine.name, url=template, schema=schema)


def _providers(r: FieldReader, data: dict) -> tuple[tuple[ProviderConfig, ...], dict[str, str]]:
    """nao's `llm.providers` → ours, and the providers we cannot speak to (name → nao's type)."""
    llm = data["llm"]
    if not isinstance(llm, dict):
        r.problem("llm", "expected a mapping", r.line_of(data, "llm"))
        return (), {}
    if llm.get("providers") is None:
        return (), {}
    providers: list[ProviderConfig] = []
    unsupported: dict[str, str] = {}
    for i, item in r.items(llm, "providers", "llm.providers"):
        where = f"llm.providers[{i}]"
        if not isinstance(item, dict):
            r.problem(where, "expected a mapping with `provider`", r.line_of(llm["providers"], i))
            continue
        declared = r.text(item, "provider", f"{where}.provider", required=True)
        if declared is None:
            continue
        kind, _, instance = declared.partition("/")
        compatible = kind in _COMPATIBLE_SPELLINGS
        named = instance or (item.get("name") if isinstance(item.get("name"), str) else "")
        if compatible:
            name = _endpoint_name(named) if named else _COMPATIBLE
            declared = f"{_COMPATIBLE}/{name}" if named else _COMPATIBLE
        else:
            name = declared
        if not compatible and declared not in _BUILT_IN:
            unsupported[declared] = declared  # reported only if a test model uses it
            continue
        base_url = r.text(item, "base_url", f"{where}.base_url") if "base_url" in item else None
        if compatible and base_url is None:
            r.problem(
                f"{where}.base_url",
                f"{declared} needs the base_url of its OpenAI-compatible server",
                r.line_of(item, "provider"),
            )
        if not name or any(p.name == name for p in providers):
            r.problem(
                f"{where}.provider",
                f"provider name {name!r} is empty or declared twice",
                r.line_of(item, "provider"),
            )
            continue
        protocol = "anthropic" if declared == "anthropic" else "openai"
        providers.append(
            ProviderConfig(
                name=name,
                protocol=protocol,
                api_key=_api_key(r, item, where, declared),
                base_url=_template(base_url) if base_url else None,
                models=_provider_models(r, item, where, protocol),
            )
        )
    return tuple(providers), unsupported


def _api_key(r: FieldReader, item: dict, where: str, declared: str) -> Templated | None:
    source = f"{NAO_CONFIG_FILE} {where}.api_key"
    if item.get("api_key") is not None:
        key = r.text(item, "api_key", f"{where}.api_key")
        return Templated(_template(key), source) if key else None
    variable = ENVIRONMENT_KEYS.get(declared)
    return Templated("{{ env('" + variable + "') }}", source) if variable else None


def _provider_models(
    r: FieldReader, item: dict, where: str, protocol: str
) -> tuple[ModelConfig, ...]:
    if item.get("models") is None:
        return ()
    models = []
    for j, spec in r.items(item, "models", f"{where}.models"):
        if isinstance(spec, str) and spec.strip():
            models.append(ModelConfig(id=spec.strip()))
        elif isinstance(spec, dict):
            model_id = r.text(spec, "id", f"{where}.models[{j}].id", required=True)
            field = f"{where}.models[{j}]"
            settings, max_tokens = read_model_settings(r, spec, field, protocol=protocol)
            if model_id:
                costs = _costs(r, spec, where, j)
                models.append(
                    ModelConfig(id=model_id, costs=costs, max_tokens=max_tokens, settings=settings)
                )
        else:
            r.problem(
                f"{where}.models[{j}]",
                "expected a mapping with `id` (or a model id)",
                r.line_of(item["models"], j),
            )
    return tuple(models)


def _costs(r: FieldReader, spec: dict, where: str, j: int) -> ModelCosts | None:
    costs = spec.get("costs")
    if not isinstance(costs, dict):
        return None
    field = f"{where}.models[{j}].costs"
    known = {
        k: r.number(costs, k, f"{field}.{k}") for k in ModelCosts.__annotations__ if k in costs
    }
    return ModelCosts(**known)


def _models(r: FieldReader, data: dict) -> tuple[str, ...]:
    """`test.models` exactly as the user wrote them (nao's spelling)."""
    block = data.get("test")
    if not isinstance(block, dict) or block.get("models") is None:
        return ()
    value = block["models"]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        r.problem(
            "test.models", "expected a list of `provider:model_id`", r.line_of(block, "models")
        )
        return ()
    found = []
    for item in items:
        provider, colon, model = item.partition(":") if isinstance(item, str) else ("", "", "")
        if not (colon and provider.strip() and model.strip()):
            r.problem(
                "test.models",
                f"invalid model {item!r}, expected `provider:model_id` "
                "(e.g. openai:gpt-4.1 or openaiCompatible/vllm:qwen3)",
                r.line_of(block, "models"),
            )
            continue
        found.append(item.strip())
    return tuple(found)


def _test_block(r: FieldReader, data: dict, spellings: tuple[str, ...]) -> TestDefaults:
    block = data.get("test")
    if block is None:
        return TestDefaults()
    if not isinstance(block, dict):
        r.problem("test", "expected a mapping", r.line_of(data, "test"))
        return TestDefaults()
    values: dict[str, Any] = {}
    if spellings:
        values["models"] = tuple(dict.fromkeys(to_model_id(s) for s in spellings))
    if "threads" in block:
        values["threads"] = r.integer(block, "threads", "test.threads", minimum=1)
    if "k" in block:
        values["k"] = r.integer(block, "k", "test.k", minimum=1, maximum=MAX_ATTEMPTS)
    if block.get("comparison") is not None:
        comparison = block["comparison"]
        if not isinstance(comparison, dict):
            r.problem("test.comparison", "expected a mapping", r.line_of(block, "comparison"))
        else:
            default = Tolerance()
            decimals = (
                r.integer(comparison, "decimals", "test.comparison.decimals", minimum=0)
                if "decimals" in comparison
                else default.decimals
            )
            rtol = (
                r.number(comparison, "rtol", "test.comparison.rtol")
                if "rtol" in comparison
                else default.rtol
            )
            atol = (
                r.number(comparison, "atol", "test.comparison.atol")
                if "atol" in comparison
                else default.atol
            )
            if None not in (decimals, rtol, atol):
                values["comparison"] = Tolerance(decimals=decimals, rtol=rtol, atol=atol)
    return TestDefaults(**{k: v for k, v in values.items() if v is not None})


def _check_test_providers(
    r: FieldReader,
    data: dict,
    providers: tuple[ProviderConfig, ...],
    unsupported: dict[str, str],
    spellings: tuple[str, ...],
) -> None:
    """A problem for each test model whose provider we cannot reach: neither declared nor
    `openai` / `anthropic` (which read their key from the environment when undeclared)."""
    block = data.get("test") if isinstance(data.get("test"), dict) else {}
    line = r.line_of(block, "models")
    for spelling in spellings:
        declared = spelling.partition(":")[0]
        name = to_model_id(spelling).partition(":")[0]
        if declared in _BUILT_IN or any(p.name == name for p in providers):
            continue
        if declared in unsupported:
            r.problem(
                "test.models",
                f"{spelling!r}: {declared} providers are not supported yet; serve the model "
                "through an OpenAI-compatible endpoint (openaiCompatible/<name> with base_url)",
                line,
            )
        else:
            r.problem(
                "test.models",
                f"{spelling!r}: no provider {declared!r} under llm.providers; declare it there",
                line,
            )


def _merged(nao: SuiteConfig, ours: SuiteConfig) -> SuiteConfig:
    """nao's config with our `eval_config.yaml` keys laid over it (ours win where both set)."""
    default = TestDefaults()
    test_overrides = {
        f.name: getattr(ours.test, f.name)
        for f in dataclasses.fields(TestDefaults)
        if getattr(ours.test, f.name) != getattr(default, f.name)
    }
    taken = {p.name for p in ours.providers}
    return dataclasses.replace(
        ours,
        test=dataclasses.replace(nao.test, **test_overrides),
        # Databases come whole from one file: ours when it configures any, else nao's.
        warehouse=ours.warehouse if ours.databases else nao.warehouse,
        databases=ours.databases or nao.databases,
        providers=ours.providers + tuple(p for p in nao.providers if p.name not in taken),
        context=ours.context or nao.context,
        synced_docs=nao.synced_docs,
        cases_dirname=nao.cases_dirname,
        results_folder=nao.results_folder,
        model_labels=nao.model_labels,
    )

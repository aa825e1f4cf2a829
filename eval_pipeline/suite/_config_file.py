"""Reads a suite's `eval_config.yaml` into its config values, reporting every problem with its line."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.suite._case import Tolerance
from eval_pipeline.suite._config import (
    CONFIG_FILE,
    DEFAULT_DATABASE_NAME,
    AgentConfig,
    AttemptBudget,
    DatabaseConfig,
    KindSettings,
    MissingSecret,
    ModelConfig,
    ModelCosts,
    NaoBackendConfig,
    ProviderConfig,
    SuiteConfig,
    Templated,
    TestDefaults,
    UsageConfig,
    WarehouseConfig,
    config_path,
    first_duckdb_warehouse,
    recording_name_problem,
)
from eval_pipeline.suite._databases import read_databases
from eval_pipeline.suite._errors import Problem, SuiteError
from eval_pipeline.suite._limits import Limits, read_limits
from eval_pipeline.suite._model_settings import read_model_settings
from eval_pipeline.suite._parse import MAX_ATTEMPTS, MAX_BUDGET_RUNS, FieldReader, parse_semantic
from eval_pipeline.suite._secrets import PUBLIC_HEADERS, register_secret
from eval_pipeline.suite._store_config import read_store
from eval_pipeline.suite._yaml import load_yaml, yaml_error_line, yaml_error_summary

_TOP_KEYS = (
    "test",
    "warehouse",
    "databases",
    "context",
    "llm",
    "agents",
    "nao_backend",
    "agent_kinds",
    "state_dir",
    "limits",
    "store",
    "usage",
)
_TEST_KEYS = (
    "models",
    "threads",
    "k",
    "comparison",
    "judge_model",
    "judge_failed_runs",
    "extraction",
    "schedule",
    "min_accuracy",
    "threshold_mode",
    "allow_errors",
    "semantic",
    "regression",
    "start_date",
    "budget",
)


def read_config_file(root: Path) -> SuiteConfig:
    """`<root>/eval_config.yaml` as written (all defaults when it is missing): no nao
    project, no provider it does not declare.

    Raises:
        SuiteError: listing every problem in the file.
    """
    root = root.resolve()
    path = root / CONFIG_FILE
    if not path.exists():
        return SuiteConfig(root=root)
    if not path.is_file():
        raise SuiteError([Problem(CONFIG_FILE, None, f"{path} is not a file")])
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise SuiteError(
            [Problem(CONFIG_FILE, None, yaml_error_summary(error), yaml_error_line(error))]
        ) from None
    except UnicodeDecodeError as error:
        raise SuiteError(
            [
                Problem(
                    CONFIG_FILE, None, f"is not UTF-8 text (byte {error.start}); save it as UTF-8"
                )
            ]
        ) from None
    except RecursionError:
        raise SuiteError(
            [Problem(CONFIG_FILE, None, "is nested too deeply to be a configuration")]
        ) from None
    r = FieldReader(CONFIG_FILE)
    if not isinstance(data, dict):
        r.problem(None, "the configuration must be a mapping")
        raise SuiteError(r.problems)
    for key in data:
        if key not in _TOP_KEYS:
            r.problem(
                str(key),
                f"unknown key; expected one of: {', '.join(_TOP_KEYS)}",
                r.line_of(data, key),
            )
    config = SuiteConfig(
        root=root,
        test=_test_block(r, data) if data.get("test") is not None else TestDefaults(),
        warehouse=_warehouse(r, data, root) if data.get("warehouse") is not None else None,
        context=_context(r, data, root) if data.get("context") is not None else (),
        providers=_providers(r, data) if data.get("llm") is not None else (),
        agents=_agents(r, data) if data.get("agents") is not None else (),
        nao_backend=_nao_backend(r, data),
        agent_kinds=_agent_kinds(r, data),
        state_dir=_state_dir(r, data, root) if data.get("state_dir") else None,
        limits=read_limits(r, data) if data.get("limits") is not None else Limits(),
        store=read_store(r, data) if data.get("store") is not None else None,
        usage=_usage(r, data) if data.get("usage") is not None else UsageConfig(),
    )
    config = _with_databases(r, data, config)
    if r.problems:
        raise SuiteError(r.problems, headline=f"{len(r.problems)} problem(s) in {CONFIG_FILE}")
    _register_secrets(config)
    return config


def warehouse_as_database(config: SuiteConfig, name: str = DEFAULT_DATABASE_NAME) -> SuiteConfig:
    """The config with its one `warehouse` as its only database (unchanged without one)."""
    if config.warehouse is None or config.databases:
        return config
    w = config.warehouse
    only = DatabaseConfig(
        name,
        "duckdb",
        path=w.path,
        dbt_project=w.dbt_project,
        declared=(CONFIG_FILE, "warehouse", None),
    )
    return dataclasses.replace(config, databases=(only,))


def _with_databases(r: FieldReader, data: dict, config: SuiteConfig) -> SuiteConfig:
    """`databases:` read, or the one `warehouse:` as a database named "warehouse".

    `warehouse` keeps naming the first database when it is a DuckDB file, for the code that
    knows only one warehouse.
    """
    if data.get("databases") is None:
        return warehouse_as_database(config)
    if data.get("warehouse") is not None:
        r.problem(
            "warehouse",
            "give either `warehouse:` (one database) or `databases:` (several), not both",
            r.line_of(data, "warehouse"),
        )
    databases = read_databases(r, data, config.root)
    return dataclasses.replace(
        config, databases=databases, warehouse=first_duckdb_warehouse(databases)
    )


def _register_secrets(config: SuiteConfig) -> None:
    """Know every secret the environment holds for this config, also in processes that never
    send a request (reports, exports, the viewer), so none of them prints a piece of one."""
    templates = [p.api_key for p in config.providers if p.api_key is not None]
    templates += [
        value
        for agent in config.agents
        for name, value in agent.headers.items()
        if name.lower() not in PUBLIC_HEADERS
    ]
    for template in templates:
        with contextlib.suppress(MissingSecret):  # reported when a request needs it
            register_secret(template.resolve())  # a key written into the file is one too
    for database in config.databases:
        if database.url is not None:
            with contextlib.suppress(MissingSecret):
                database.resolve_url()


def _state_dir(r: FieldReader, data: dict, root: Path) -> Path | None:
    name = r.text(data, "state_dir", "state_dir")
    if name is None:
        return None
    path = config_path(root, name)
    # Found here, not when the first run writes to it: an existing file there is a typo.
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                r.problem("state_dir", f"{part} is a file; state_dir must be a folder")
            break
    return path


def _string_list(r: FieldReader, container: dict, key: str, field_name: str) -> tuple[str, ...]:
    value = container[key]
    if isinstance(value, str):
        value = [value]
        container = {key: value}
    found = []
    for i, item in r.items(container, key, field_name):
        if isinstance(item, str) and item.strip():
            found.append(item.strip())
        else:
            r.problem(f"{field_name}[{i}]", "expected a non-empty string")
    return tuple(found)


def _test_block(r: FieldReader, data: dict) -> TestDefaults:
    block = r.mapping(data, "test", "test", _TEST_KEYS)
    if block is None:
        return TestDefaults()
    defaults = TestDefaults()
    values: dict[str, Any] = {}
    if "models" in block:
        values["models"] = _string_list(r, block, "models", "test.models")
        for model in values["models"]:
            if (problem := recording_name_problem(model)) is not None:
                r.problem("test.models", problem, r.line_of(block, "models"))
    if "threads" in block:
        values["threads"] = r.integer(block, "threads", "test.threads", minimum=1)
    if "k" in block:
        values["k"] = r.integer(block, "k", "test.k", minimum=1, maximum=MAX_ATTEMPTS)
    if "comparison" in block:
        comparison = r.mapping(block, "comparison", "test.comparison", ("decimals", "rtol", "atol"))
        if comparison is not None:
            values["comparison"] = Tolerance(
                decimals=r.integer(comparison, "decimals", "test.comparison.decimals", minimum=0)
                if "decimals" in comparison
                else defaults.comparison.decimals,
                rtol=r.number(comparison, "rtol", "test.comparison.rtol")
                if "rtol" in comparison
                else defaults.comparison.rtol,
                atol=r.number(comparison, "atol", "test.comparison.atol")
                if "atol" in comparison
                else defaults.comparison.atol,
            )
    for key in ("judge_model", "schedule"):
        if key in block:
            values[key] = r.text(block, key, f"test.{key}")
    if values.get("schedule") is not None and not is_cron(values["schedule"]):
        r.problem(
            "test.schedule",
            f"{values['schedule']!r} is not a cron expression; expected 5 fields, e.g. '0 6 * * *'",
            r.line_of(block, "schedule"),
        )
    if (problem := recording_name_problem(values.get("judge_model") or "")) is not None:
        r.problem("test.judge_model", problem, r.line_of(block, "judge_model"))
    if "extraction" in block:
        values["extraction"] = r.choice(
            block, "extraction", "test.extraction", ("llm", "last_query")
        )
    if "min_accuracy" in block:
        accuracy = r.number(block, "min_accuracy", "test.min_accuracy")
        if accuracy is not None and accuracy > 1:
            r.problem("test.min_accuracy", "expected a fraction between 0 and 1")
        values["min_accuracy"] = accuracy
    if "threshold_mode" in block:
        values["threshold_mode"] = r.choice(
            block, "threshold_mode", "test.threshold_mode", ("average", "all")
        )
    if "allow_errors" in block:
        values["allow_errors"] = r.boolean(block, "allow_errors", "test.allow_errors")
    if "judge_failed_runs" in block:
        values["judge_failed_runs"] = r.boolean(
            block, "judge_failed_runs", "test.judge_failed_runs"
        )
    if "semantic" in block:
        values["semantic"] = parse_semantic(r, block, "test.semantic")
    if "regression" in block:
        regression = r.mapping(block, "regression", "test.regression", ("significant_only",))
        if regression is not None and "significant_only" in regression:
            values["regression_significant_only"] = r.boolean(
                regression, "significant_only", "test.regression.significant_only"
            )
    if "start_date" in block:
        values["start_date"] = _start_date(r, block)
    if "budget" in block:
        values["budget"] = _budget(r, block)
    return TestDefaults(**{k: v for k, v in values.items() if v is not None})


#: Each field of a cron expression: its bounds, and the names it may use for its values.
_CRON_FIELDS = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    (0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)


def is_cron(text: str) -> bool:
    """Whether `text` is a five-field cron expression a schedule can run on (minute, hour,
    day of month, month, day of week: `*`, numbers or names, ranges, lists, `/` steps), so
    a typo is a configuration mistake the command names, before anything loads it."""
    fields = text.split()
    if len(fields) != len(_CRON_FIELDS):
        return False

    def value(part: str, low: int, high: int, names: tuple[str, ...]) -> int | None:
        if part.lower() in names:
            return names.index(part.lower()) + low
        number = int(part) if part.isdigit() else None
        return number if number is not None and low <= number <= high else None

    for field, (low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in field.split(","):
            span, _, step = item.partition("/")
            if step and not (step.isdigit() and int(step) > 0):
                return False
            if span == "*":
                continue
            first, _, last = span.partition("-")
            start, end = value(first, low, high, names), value(last or first, low, high, names)
            if start is None or end is None or start > end:
                return False
    return True


def _budget(r: FieldReader, block: dict) -> AttemptBudget | None:
    """`budget: 200` (runs) or `budget: {runs, usd, question, alpha, width}`."""
    if isinstance(block["budget"], int) and not isinstance(block["budget"], bool):
        runs = r.integer(block, "budget", "test.budget", minimum=1, maximum=MAX_BUDGET_RUNS)
        return AttemptBudget(runs=runs, configured_in=r.source) if runs is not None else None
    keys = ("runs", "usd", "question", "alpha", "width")
    budget = r.mapping(block, "budget", "test.budget", keys)
    if budget is None:
        return None
    values: dict[str, Any] = {}
    if "runs" in budget:
        values["runs"] = r.integer(
            budget, "runs", "test.budget.runs", minimum=1, maximum=MAX_BUDGET_RUNS
        )
    for key in ("usd", "alpha", "width"):
        if key in budget:
            values[key] = r.number(budget, key, f"test.budget.{key}", positive=True)
    for key in ("alpha", "width"):
        if values.get(key) is not None and values[key] >= 1:
            r.problem(f"test.budget.{key}", "expected a fraction between 0 and 1")
            values[key] = None
    if "question" in budget:
        values["question"] = r.choice(
            budget, "question", "test.budget.question", ("compare", "pass_rate")
        )
    if "runs" not in budget and "usd" not in budget:
        r.problem("test.budget", "needs runs or usd (e.g. budget: {runs: 200})")
        return None
    if values.get("runs") is None and values.get("usd") is None:
        return None  # the bad value is named already
    given = {k: v for k, v in values.items() if v is not None}
    return AttemptBudget(**given, configured_in=r.source)


def _start_date(r: FieldReader, block: dict) -> date | None:
    value = block["start_date"]
    if isinstance(value, date) and not isinstance(value, datetime):
        return value  # YAML reads an unquoted 2026-01-31 as a date
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        r.problem(
            "test.start_date",
            f"expected a day as YYYY-MM-DD, got {value!r}",
            r.line_of(block, "start_date"),
        )
        return None


def _warehouse(r: FieldReader, data: dict, root: Path) -> WarehouseConfig | None:
    block = r.mapping(data, "warehouse", "warehouse", ("type", "path", "dbt_project"))
    if block is None:
        return None
    kind = block.get("type", "duckdb")
    if kind != "duckdb":
        r.problem("warehouse.type", f"only 'duckdb' warehouses are supported, got {kind!r}")
        return None
    path = r.text(block, "path", "warehouse.path", required=True)
    dbt_project = (
        r.text(block, "dbt_project", "warehouse.dbt_project") if "dbt_project" in block else None
    )
    if path is None:
        return None
    dbt_path = config_path(root, dbt_project) if dbt_project else None
    if dbt_path is not None and not (dbt_path / "dbt_project.yml").exists():
        r.problem(
            "warehouse.dbt_project",
            f"no dbt_project.yml in {dbt_path}",
            r.line_of(block, "dbt_project"),
        )
    return WarehouseConfig(type="duckdb", path=config_path(root, path), dbt_project=dbt_path)


def _usage(r: FieldReader, data: dict) -> UsageConfig:
    block = r.mapping(
        data,
        "usage",
        "usage",
        ("traces", "source", "schedule", "mask_text", "confirm_corrections"),
    )
    if block is None:
        return UsageConfig()
    values: dict[str, Any] = {}
    if "traces" in block:
        values["traces"] = _string_list(r, block, "traces", "usage.traces")
    if "source" in block:
        values["source"] = r.choice(block, "source", "usage.source", ("otel", "nao", "jsonl"))
    if "schedule" in block:
        schedule = r.text(block, "schedule", "usage.schedule")
        if schedule is not None and not is_cron(schedule):
            r.problem(
                "usage.schedule",
                f"{schedule!r} is not a cron expression; expected 5 fields, e.g. '0 7 * * *'",
                r.line_of(block, "schedule"),
            )
        elif schedule is not None:
            values["schedule"] = schedule
    for name in ("mask_text", "confirm_corrections"):
        if name in block:
            flag = r.boolean(block, name, f"usage.{name}")
            if flag is not None:
                values[name] = flag
    return UsageConfig(**values)


def _context(r: FieldReader, data: dict, root: Path) -> tuple[Path, ...]:
    paths = []
    for name in _string_list(r, data, "context", "context"):
        path = config_path(root, name)
        if not path.is_file():
            r.problem("context", f"context file {name!r} does not exist (looked in {root})")
        elif not _is_utf8_text(path):
            r.problem("context", f"context file {name!r} is not UTF-8 text; give a text file")
        paths.append(path)
    return tuple(paths)


def _is_utf8_text(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return False
    return "\x00" not in text  # NUL bytes decode as UTF-8 but mark a binary file


def _costs(r: FieldReader, container: dict, field_name: str) -> ModelCosts | None:
    block = r.mapping(
        container, "costs", field_name, ("input_no_cache", "input_cache_read", "output")
    )
    if block is None:
        return None
    return ModelCosts(
        **{
            key: r.number(block, key, f"{field_name}.{key}")
            for key in block
            if key in ModelCosts.__annotations__
        }
    )


def _providers(r: FieldReader, data: dict) -> tuple[ProviderConfig, ...]:
    llm = r.mapping(data, "llm", "llm", ("providers",))
    if not llm or "providers" not in llm:
        return ()
    providers = []
    items = llm["providers"]
    for i, _item in r.items(llm, "providers", "llm.providers"):
        where = f"llm.providers[{i}]"
        block = r.mapping(
            items,
            i,
            where,
            ("provider", "protocol", "api_key", "base_url", "models", "timeout_s", "max_tokens"),
        )
        if block is None:
            continue
        name = r.text(block, "provider", f"{where}.provider", required=True)
        base_url = r.text(block, "base_url", f"{where}.base_url") if "base_url" in block else None
        protocol = block.get("protocol") or ("anthropic" if name == "anthropic" else "openai")
        if protocol not in ("openai", "anthropic"):
            r.problem(f"{where}.protocol", f"expected 'openai' or 'anthropic', got {protocol!r}")
            continue
        if name not in ("openai", "anthropic") and base_url is None and "protocol" not in block:
            r.problem(
                f"{where}.base_url",
                f"provider {name!r} is neither openai nor anthropic: give the base_url of its OpenAI-compatible server",
            )
        api_key = r.text(block, "api_key", f"{where}.api_key") if "api_key" in block else None
        models = []
        for j, model in r.items(block, "models", f"{where}.models") if "models" in block else []:
            if isinstance(model, str):
                models.append(ModelConfig(id=model))
                continue
            field = f"{where}.models[{j}]"
            spec = r.mapping(block["models"], j, field, ("id", "costs", "max_tokens", "settings"))
            if spec is None:
                continue
            model_id = r.text(spec, "id", f"{field}.id", required=True)
            costs = _costs(r, spec, f"{field}.costs") if spec.get("costs") else None
            settings, settings_limit = read_model_settings(r, spec, field, protocol=protocol)
            limit = _max_tokens(r, spec, f"{field}.max_tokens") or settings_limit
            if model_id:
                models.append(
                    ModelConfig(id=model_id, costs=costs, max_tokens=limit, settings=settings)
                )
        timeout = (
            r.number(block, "timeout_s", f"{where}.timeout_s", positive=True)
            if "timeout_s" in block
            else 120.0
        )
        if name:
            providers.append(
                ProviderConfig(
                    name=name,
                    protocol=protocol,
                    api_key=Templated(api_key, f"{CONFIG_FILE} {where}.api_key")
                    if api_key
                    else None,
                    base_url=base_url,
                    models=tuple(models),
                    timeout_s=timeout or 120.0,  # None only with a problem reported
                    max_tokens=_max_tokens(r, block, f"{where}.max_tokens"),
                )
            )
    return tuple(providers)


def _max_tokens(r: FieldReader, block: dict, field_name: str) -> int | None:
    if block.get("max_tokens") is None:
        return None
    return r.integer(block, "max_tokens", field_name, minimum=1)


def _nao_backend(r: FieldReader, data: dict) -> NaoBackendConfig:
    """The `nao_backend:` block (`url`, `timeout_s`); all defaults when it is missing."""
    if data.get("nao_backend") is None:
        return NaoBackendConfig()
    block = r.mapping(data, "nao_backend", "nao_backend", ("url", "timeout_s")) or {}
    url = r.text(block, "url", "nao_backend.url")
    if url is not None and not url.startswith(("http://", "https://")):
        r.problem("nao_backend.url", f"expected an http:// or https:// URL, got {url!r}")
        url = None
    timeout = (
        r.number(block, "timeout_s", "nao_backend.timeout_s", positive=True)
        if "timeout_s" in block
        else None
    )
    return NaoBackendConfig(url=url, timeout_s=timeout or NaoBackendConfig.timeout_s)


def _agent_kinds(r: FieldReader, data: dict) -> dict[str, KindSettings]:
    """The `agent_kinds:` block: each added agent kind's own settings, by its prefix; the kind
    checks what is in each (`AgentKind.settings_problem`, before any model runs)."""
    if data.get("agent_kinds") is None:
        return {}
    block = data["agent_kinds"]
    if not isinstance(block, dict):
        r.problem(
            "agent_kinds",
            "expected a mapping of agent kind prefix → its settings",
            r.line_of(data, "agent_kinds"),
        )
        return {}
    return {
        str(prefix): KindSettings(settings, r.line_of(block, prefix))
        for prefix, settings in block.items()
    }


def _agents(r: FieldReader, data: dict) -> tuple[AgentConfig, ...]:
    agents = []
    first_seen: dict[str, str] = {}  # agent name → the entry that defined it
    items = data["agents"]
    for i, _item in r.items(data, "agents", "agents"):
        where = f"agents[{i}]"
        block = r.mapping(items, i, where, ("name", "url", "headers", "timeout_s", "version"))
        if block is None:
            continue
        name = r.text(block, "name", f"{where}.name", required=True)
        url = r.text(block, "url", f"{where}.url", required=True)
        version = r.text(block, "version", f"{where}.version")
        if url is not None and not url.startswith(("http://", "https://")):
            r.problem(f"{where}.url", f"expected an http:// or https:// URL, got {url!r}")
        headers = {}
        if block.get("headers") is not None:
            header_block = r.mapping(
                block, "headers", f"{where}.headers", tuple(map(str, block["headers"] or {}))
            )
            for key, value in (header_block or {}).items():
                if isinstance(value, str):
                    headers[str(key)] = Templated(value, f"{CONFIG_FILE} {where}.headers.{key}")
                else:
                    r.problem(f"{where}.headers.{key}", "expected a string")
        timeout = (
            r.number(block, "timeout_s", f"{where}.timeout_s", positive=True)
            if "timeout_s" in block
            else 300.0
        )
        if name is not None and name in first_seen:
            r.problem(
                f"{where}.name",
                f"agent name {name!r} is already used by {first_seen[name]}; "
                "give each agent its own name",
                r.line_of(block, "name"),
            )
            continue
        if name is not None:
            first_seen[name] = where
        if name and url:
            agents.append(
                AgentConfig(
                    name=name,
                    url=url,
                    headers=headers,
                    timeout_s=timeout or 300.0,
                    version=version,
                )
            )
    return tuple(agents)

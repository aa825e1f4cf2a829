"""Model ids: what each names (a provider's model, an external agent, a recording) and whether the suite configures it."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.agents._kinds import AGENT_KINDS, PROVIDER_PREFIX, agent_kind
from eval_pipeline.suite import (
    CONFIG_FILE,
    MissingSecret,
    Problem,
    SuiteConfig,
    SuiteError,
    Templated,
    recording_name_problem,
)

RECORDINGS_DIR = "recordings"


def split_model_id(model: str) -> tuple[str, str]:
    """``provider:model_id`` → (provider, model_id); the model id may hold more colons.

    Raises:
        UnknownModel: there is no ``provider:`` prefix or no model after it.
    """
    provider, colon, model_id = model.partition(":")
    if not colon or not provider or not model_id:
        raise UnknownModel(model, "expected `provider:model_id`, e.g. openai:gpt-4.1", None)
    return provider, model_id


def recording_path(config: SuiteConfig, name: str) -> Path:
    """The file of recording `name`, always directly in the suite's recordings folder.

    Raises:
        UnknownModel: the name holds a path (`../x`, `a/b`), which could read outside the suite.
    """
    problem = recording_name_problem(f"replay:{name}")
    if problem is not None:
        raise UnknownModel(f"replay:{name}", problem.split(": ", 1)[1], None)
    return config.root / RECORDINGS_DIR / f"{name}.jsonl"


def recordings(config: SuiteConfig) -> list[str]:
    """The `replay:<name>` ids of the suite's recordings, sorted."""
    folder = config.root / RECORDINGS_DIR
    return sorted(f"replay:{p.stem}" for p in folder.glob("*.jsonl")) if folder.is_dir() else []


def model_id_problem(
    config: SuiteConfig, model: str, *, chat_model: bool = False
) -> UnknownModel | None:
    """Why `model` names nothing the suite configures, or None when it names something.

    Args:
        config: the suite configuration (providers, agents, the recordings folder).
        model: `<prefix>:<rest>`, checked by the agent kind of its prefix (`agent_kind`):
            `provider:model_id`, `http:<agent>`, `nao:<provider>:<model_id>` (nao's own
            agent behind its backend), `replay:<recording>`, or a kind a package adds.
        chat_model: the id must name an LLM (a judge, the built-in agent's model), so an
            external `http:` agent or nao's agent does not do.
    """
    if "|" in model:  # the separator of the `models × days` partition keys
        return UnknownModel(model, "a model id may not contain '|'", None)
    try:
        _, rest = split_model_id(model)
    except UnknownModel as error:
        return error
    kind = agent_kind(model)
    if chat_model and not kind.is_llm:
        return UnknownModel(
            model,
            f"`{kind.prefix}:` names {kind.names}, not an LLM (a judge or the built-in agent's "
            "model is provider:model or replay:name)",
            None,
        )
    return kind.problem(config, model, rest)


def require_model_id(config: SuiteConfig, model: str, *, chat_model: bool = False) -> None:
    """Raise `model_id_problem`'s `UnknownModel`, if any."""
    if (problem := model_id_problem(config, model, chat_model=chat_model)) is not None:
        raise problem


def require_models(
    config: SuiteConfig,
    models: Sequence[str],
    *,
    source: str,
    field: str | None = None,
    require_one: bool = False,
) -> None:
    """Refuse, before any work starts, model ids that name nothing configured and a
    `test.judge_model` that names no LLM; every problem is listed at once.

    Args:
        config: the suite configuration.
        models: the ids to evaluate.
        source: where they were given, for the message (`--model`, `eval_config.yaml`).
        field: the field of `source` that holds them (`test.models`), if any.
        require_one: evaluating no model at all is a mistake too (a command line's request).

    Raises:
        SuiteError: one problem per bad id, naming it, why, and what is configured.
    """
    problems = [
        Problem(source, field, problem.detail)
        for model in models
        if (problem := model_id_problem(config, model)) is not None
    ]
    if require_one and not models:
        problems.append(
            Problem(source, field, "no model to evaluate: give -m MODEL or list test.models")
        )
    judge = config.test.judge_model
    if judge is not None and (problem := model_id_problem(config, judge, chat_model=True)):
        problems.append(Problem(CONFIG_FILE, "test.judge_model", problem.detail))
    problems += kind_settings_problems(config)
    if problems:
        raise SuiteError(problems, headline="unknown model(s); nothing was run")


def kind_settings_problems(config: SuiteConfig) -> list[Problem]:
    """A problem per block of `agent_kinds:` that no agent kind takes, or that its kind
    refuses (`AgentKind.settings_problem`)."""
    problems = []
    for prefix, given in config.agent_kinds.items():
        where = f"agent_kinds.{prefix}"
        kind = AGENT_KINDS.get(prefix) if prefix != PROVIDER_PREFIX else None
        if kind is None:
            added = sorted(k.prefix for k in AGENT_KINDS.all() if k.prefix != PROVIDER_PREFIX)
            why = (
                f"no agent kind has the prefix {prefix!r}; the kinds installed: {', '.join(added)}"
            )
        else:
            why = kind.settings_problem(given.data)
        if why is not None:
            problems.append(Problem(CONFIG_FILE, where, why, given.line))
    return problems


def unset_secrets(
    needed: Sequence[tuple[str | None, Templated]], *, field: str, shown: str
) -> list[Problem]:
    """A problem per environment variable that a needed secret reads and the environment
    lacks; `needed` is (the config field holding it, its value as written)."""
    return [
        Problem(
            templated.where,
            where,
            f"environment variable {name} is not set; {shown} ({field}) needs it: export it "
            "before running",
        )
        for where, templated in needed
        for name in templated.env_names
        if not os.environ.get(name)
    ]


def _missing_secrets(config: SuiteConfig, model: str, field: str, shown: str) -> list[Problem]:
    """The unset environment variables behind the secrets `model` needs (its kind's
    `missing_secrets`). `shown`: the model as the user spelled it, for the message."""
    return agent_kind(model).missing_secrets(config, model, field=field, shown=shown)


def require_secrets(
    config: SuiteConfig,
    models: Sequence[str],
    *,
    source: str,
    label: Callable[[str], str] = str,
) -> None:
    """Refuse, before anything is sent, to evaluate models (or judge with a model) whose
    secrets are not in the environment: a configuration mistake, not a failed run.

    Args:
        config: the suite configuration.
        models: the ids to evaluate (already checked by `require_models`).
        source: where they were given, for the message (`--model`, `test.models`).
        label: a model as the user spelled it (`openaiCompatible/vllm:qwen3`), for the
            message.

    Raises:
        MissingSecret: one problem per unset variable, naming it and the config field.
    """
    problems = [
        p for model in models for p in _missing_secrets(config, model, source, label(model))
    ]
    if (judge := config.test.judge_model) is not None:
        problems += _missing_secrets(config, judge, "test.judge_model", judge)
    if problems:
        raise MissingSecret(problems, headline="a secret the run needs is missing; nothing was run")

"""An agent kind: the one interface every kind of model id is an adapter behind, and the registry that finds it by its prefix.

A model id is `<prefix>:<rest>`. The prefix picks the kind: `http:` an external agent,
`nao:` nao's agent, `replay:` a recording, and any other prefix a provider's LLM driving the
built-in agent. Nothing else in the pipeline reads a prefix: the model ids, the factory,
the identity of what answered and the secrets a run needs each ask the kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from eval_pipeline.agents._errors import UnknownModel
from eval_pipeline.suite import Problem, Registry, SuiteConfig

if TYPE_CHECKING:
    from eval_pipeline.agents._chat import Agent, ChatModel
    from eval_pipeline.agents._factory import AgentFactory

#: The entry-point group a package adds agent kinds to.
AGENTS_GROUP = "eval_pipeline.agents"

#: The kind of an id whose prefix no kind takes: a provider under `llm.providers`.
PROVIDER_PREFIX = ""


class AgentKind(ABC):
    """One kind of model id: how it is spelled and checked, what it builds, what answered.

    A kind is one class, found through the registry (built-in, an entry point in the
    `eval_pipeline.agents` group, or `register_agent_kind`). Its ids are `<prefix>:<rest>`;
    the suite's configuration (`SuiteConfig`) is what it may read to check and build one.
    """

    #: The prefix of its model ids, before the first colon (`http`, `nao`, `replay`).
    prefix: ClassVar[str]
    #: What its ids name, for messages ("an external agent").
    names: ClassVar[str]
    #: Its ids name an LLM, which can also be a judge or the built-in agent's model.
    is_llm: ClassVar[bool] = False

    @abstractmethod
    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        """Why `model` (`rest` is what follows the prefix) names nothing `config` has, or
        None: checked before anything runs, and again before it is built."""

    @abstractmethod
    def build(self, factory: AgentFactory, model: str) -> Agent:
        """What answers a test for `model`; built once per id by `factory`, which holds the
        suite's configuration, its provider pool and its warehouses."""

    def chat_model(self, factory: AgentFactory, model: str) -> ChatModel:
        """The LLM `model` names (`is_llm` kinds only)."""
        raise UnknownModel(model, f"names {self.names}, not an LLM", None)

    @abstractmethod
    def identity(self, config: SuiteConfig, model: str) -> Any:
        """What answers for `model`, as plain data (its digest keys reuse: a stored run is
        reused only while this is unchanged). Leave out what changes no answer (timeouts,
        prices)."""

    def endpoint(self, config: SuiteConfig, model: str) -> dict[str, Any]:
        """The server and request settings behind an LLM id, kept with a judge's grades;
        empty for what is not an LLM."""
        return {}

    def settings_problem(self, settings: Any) -> str | None:
        """Why `settings`, the kind's own block in `eval_config.yaml` (`agent_kinds.<prefix>`,
        plain YAML data), will not do, or None; checked before any model runs. A kind that
        reads settings says what it expects here; by default it takes none."""
        return f"{self.names} takes no settings; remove agent_kinds.{self.prefix}"

    def settings(self, config: SuiteConfig) -> Any:
        """The kind's own block in `config` (`agent_kinds.<prefix>`), None when there is none.
        What in it changes the answers belongs in `identity` too."""
        given = config.agent_kinds.get(self.prefix)
        return None if given is None else given.data

    def missing_secrets(
        self, config: SuiteConfig, model: str, *, field: str, shown: str
    ) -> list[Problem]:
        """A problem per secret a run of `model` needs that the environment lacks (the
        preflight before anything is sent). `field` is where the id was given, `shown` the
        id as the user spelled it."""
        return []


AGENT_KINDS: Registry[AgentKind] = Registry(
    AGENTS_GROUP,
    {
        "replay": "eval_pipeline.agents._builtin_kinds:ReplayKind",
        "http": "eval_pipeline.agents._builtin_kinds:HttpKind",
        "nao": "eval_pipeline.agents._builtin_kinds:NaoKind",
        "provider": "eval_pipeline.agents._builtin_kinds:ProviderKind",
    },
    name_of=lambda kind: kind.prefix,
    accepts=lambda kind: isinstance(kind, AgentKind),
)


def agent_kind(model: str) -> AgentKind:
    """The kind of `model` by its prefix; a provider's LLM when no kind takes the prefix."""
    prefix = model.partition(":")[0]
    kind = AGENT_KINDS.get(prefix) if prefix != PROVIDER_PREFIX else None
    found = kind or AGENT_KINDS.get(PROVIDER_PREFIX)
    assert found is not None  # the provider kind is built in
    return found


def register_agent_kind(kind: AgentKind) -> AgentKind:
    """Add an agent kind in this process (as a package does with an entry point in the
    `eval_pipeline.agents` group); `unregister_agent_kind(kind.prefix)` removes it."""
    return AGENT_KINDS.register(kind)


def unregister_agent_kind(prefix: str) -> None:
    AGENT_KINDS.unregister(prefix)

"""A toy agent kind, added from outside the product as docs/extending.md shows: `echo:<words>`.

`echo:revenue-is-42` answers every test with "revenue is 42". It signs in with a token
(`TOY_ECHO_TOKEN`), so the preflight has a secret to ask for, and it has settings of its own
in eval_config.yaml (`agent_kinds: {echo: {also: <words>}}`: words said after the id's).
"""

from __future__ import annotations

import os
import re
from typing import Any

from eval_pipeline.agents import AgentFactory, AgentKind, AgentRun, UnknownModel
from eval_pipeline.suite import Case, Problem, SuiteConfig

TOKEN_VARIABLE = "TOY_ECHO_TOKEN"


class EchoAgent:
    """Answers every test with the same words."""

    def __init__(self, model_id: str, words: str) -> None:
        self.model_id = model_id
        self.words = words

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        run.final_text = self.words
        run.messages = [
            {"role": "user", "content": case.prompt},
            {"role": "assistant", "content": self.words},
        ]


class EchoKind(AgentKind):
    """`echo:<words>`: words joined by `-`, answered as they are."""

    prefix = "echo"
    names = "an echo"

    def problem(self, config: SuiteConfig, model: str, rest: str) -> UnknownModel | None:
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rest):
            return UnknownModel(model, "expected echo:<words-joined-by-dashes>", None)
        return None

    def settings_problem(self, settings: Any) -> str | None:
        if not isinstance(settings, dict) or set(settings) - {"also"}:
            return "expected a mapping with one key, also: <words>"
        if not isinstance(settings.get("also", ""), str):
            return "also: expected words"
        return None

    def build(self, factory: AgentFactory, model: str) -> EchoAgent:
        words = model.partition(":")[2].replace("-", " ")
        also = (self.settings(factory.config) or {}).get("also")
        return EchoAgent(model, f"{words} {also}" if also else words)

    def identity(self, config: SuiteConfig, model: str) -> Any:
        return {"echo": 1, "settings": self.settings(config)}  # they change the answers

    def missing_secrets(
        self, config: SuiteConfig, model: str, *, field: str, shown: str
    ) -> list[Problem]:
        if os.environ.get(TOKEN_VARIABLE):
            return []
        return [
            Problem(
                "the environment",
                None,
                f"environment variable {TOKEN_VARIABLE} is not set; {shown} ({field}) needs it",
            )
        ]

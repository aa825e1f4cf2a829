"""Dagster resources: the suite being evaluated, swappable in tests."""

from pathlib import Path

import dagster as dg

from eval_pipeline.store import StoreLayout, try_ensure_database
from eval_pipeline.suite import (
    AgentContext,
    Suite,
    SuiteConfig,
    load_agent_context,
    load_config,
    load_suite,
)


class SuiteResource(dg.ConfigurableResource):
    """The suite folder (test files, `eval_config.yaml`, context files, dbt project)."""

    root: str

    @property
    def path(self) -> Path:
        return Path(self.root)

    def load(self) -> Suite:
        """Load and validate every test file; raises `SuiteError` listing all problems."""
        return load_suite(self.path)

    def config(self) -> SuiteConfig:
        return load_config(self.path)

    def agent_context(self) -> AgentContext:
        return load_agent_context(self.config())

    def store(self) -> StoreLayout:
        """The suite's result store, with its SQL views in place (or, while results.duckdb is
        held open elsewhere, left for the next command: writers never need it)."""
        layout = StoreLayout.of(self.config())
        try_ensure_database(layout)
        return layout
